package conn

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A pipe of a Sentinel group's master (see Sentinel) is retired when
// Sentinel names another master: the server may go on taking writes as a
// master for seconds, and a call sent there would be a vote of a server
// that no longer speaks for the group. From the retirement on, nothing the
// pipe has not sent yet goes out: every call it holds, or gets, is answered
// ErrDemoted; its connections are closed. Calls already on the wire stay
// what they were: sent while the server was the named master.

// masterRule is what a Sentinel group's pipe checks of its server; the
// zero value, a standalone master's or a cluster's, checks nothing.
type masterRule struct {
	// only, set before any call, makes a new connection to a server
	// that is not a master fail (see masterRole).
	only bool
	// retired is set while Sentinel names another master (see retire).
	retired atomic.Bool
}

// ErrDemoted answers a call that a retired pipe did not send: Sentinel
// named another master of the group before the call went out. It matches
// ErrShed (the call never reached the server, so it took nothing there).
var ErrDemoted error = demoted{}

type demoted struct{}

func (demoted) Error() string {
	return "not sent: Sentinel named another master of the group before the call went out"
}

func (demoted) Is(target error) bool { return target == ErrShed }

// retire makes the pipe answer ErrDemoted to every call it has not sent,
// and closes its connections. It waits for a batch on the wire (at most
// its node timeout, or a set-up's time). The pipe stays usable: restore
// undoes it when Sentinel names the server again.
func (p *Pipe) retire() {
	p.role.retired.Store(true)
	for i := range p.queues {
		q := &p.queues[i]
		// Under the queue's mu, which whoever sends holds: once the flag
		// is seen there, nothing more is sent (see sendable, trySend).
		q.mu.Lock()
		q.w.drop()
		q.mu.Unlock()
	}
}

// restore makes a retired pipe send again: Sentinel names its server as
// the master once more. Its connections open anew, each checked as usual.
func (p *Pipe) restore() { p.role.retired.Store(false) }

// sendable returns how many of batch's first k calls (those shed kept) may
// go out, and the error of the others: all of them once the pipe is
// retired, each marked unsent (Call.Unsent) as a shed call is.
func (p *Pipe) sendable(batch []*Call, k int) (int, error) {
	if !p.role.retired.Load() {
		return k, ErrShed
	}
	for _, c := range batch[:k] {
		if c.Unsent != nil {
			c.Unsent.Store(true)
		}
	}
	return 0, ErrDemoted
}

// errNotMaster refuses a new connection of a Sentinel group's pipe to a
// server that says it is not a master.
var errNotMaster = errors.New("redlock: the server Sentinel named is not a master (INFO replication role), so it does not vote")

// masterRole is the verdict of open on the role of a connection's server,
// from its INFO replication reply, for a pipe that must reach a master
// (masterRule.only).
func masterRole(repl *redis.StringCmd) error {
	if err := repl.Err(); err != nil {
		return fmt.Errorf("redlock: cannot learn the server's role (INFO replication): %w", err)
	}
	if !strings.Contains(repl.Val(), "role:master") {
		return errNotMaster
	}
	return nil
}
