package redlock

import (
	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// decodeFunc turns a script's integer reply into a node's vote.
type decodeFunc = func(int64, error) (quorum.Vote, int64, error)

// The scripts' replies, named where the scripts' arguments are
// (internal/wire).
const (
	replyOurs      = wire.ReplyOurs
	replyGone      = wire.ReplyGone
	replyOther     = wire.ReplyOther
	pttlGone       = wire.PTTLGone
	pttlOther      = wire.PTTLOther
	acquireGranted = wire.AcquireGranted
)
