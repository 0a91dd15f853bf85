package redlock

import "github.com/quorumlock/redlock/quorum"

// decodeFunc turns a script's integer reply into a node's vote.
type decodeFunc = func(int64, error) (quorum.Vote, int64, error)

// The scripts' replies, in one table. Each script's own section below says
// which it returns.
const (
	// The compare-and-X scripts (release, extend): what our token found.
	replyOurs  = 1  // our token held the key (and the action was done)
	replyGone  = 0  // the key is gone
	replyOther = -1 // another token holds the key

	// pttl.lua answers the PTTL (-1: no expiry) where our token holds the
	// key, else one of these.
	pttlGone  = -2
	pttlOther = -3

	// acquire.lua answers at least acquireGranted when it granted (the
	// fence, 0, or the holds of a re-entry), else -(holder's PTTL + 2).
	acquireGranted = 0
)
