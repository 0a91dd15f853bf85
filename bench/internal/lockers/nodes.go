package lockers

import (
	"log/slog"

	"github.com/quorumlock/redlock/redlock"
)

// OverNodes sets up plain redlock (the Redlock implementation, default
// options) over nodes of any kind: standalone servers, Redis Clusters, or
// both. The clients the nodes were made of stay the caller's.
func OverNodes(nodes []redlock.Node) (Impl, error) {
	l, err := redlock.NewNodes(nodes, redlock.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	return ourImpl{l}, nil
}
