package quorum

import (
	"context"
	"sync"
	"time"
)

// Each calls fn for every node in parallel and returns when every call has
// returned, or when timeout has passed, whichever comes first. Calls still
// running then are tracked by background, if it is set. It serves clean-up
// work whose outcome decides nothing, such as undoing a failed acquisition.
func Each(ctx context.Context, nodes int, timeout time.Duration, background *sync.WaitGroup, fn func(ctx context.Context, node int)) {
	Run(ctx, &Round[struct{}]{
		Nodes:   nodes,
		Need:    nodes,
		Timeout: timeout,
		Call: func(ctx context.Context, node int) (Vote, struct{}, error) {
			fn(ctx, node)
			return Yes, struct{}{}, nil
		},
		Background: background,
	})
}
