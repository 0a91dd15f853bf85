// Package lockers puts the lock libraries under comparison, and the floor
// they are measured against, behind one small interface. Each is used through its documented API with its default
// options, as a user would use it; where a library has no default for
// something the benchmark needs (bsm/redislock does not retry by default),
// the choice is stated next to the code.
package lockers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// TTL is the lock TTL for every implementation: the default of both
// redlock and redsync (bsm/redislock has none).
const TTL = 8 * time.Second

// A Worker is one goroutine's handle on an implementation. It holds at most
// one lock at a time and is not safe for concurrent use: give each
// goroutine its own.
type Worker interface {
	// Lock acquires key. With wait it retries per the library's default
	// strategy until it succeeds, the library gives up, or ctx ends;
	// without it makes exactly one attempt.
	Lock(ctx context.Context, key string, wait bool) error
	// Unlock releases the lock of the last successful Lock.
	Unlock(ctx context.Context) error
}

// An Impl is one implementation set up over a fixed list of nodes.
type Impl interface {
	// NewWorker returns a Worker for one goroutine.
	NewWorker() Worker
	// Close releases what the Impl holds; its workers must be idle.
	Close() error
}

// Implementation names, as in the table and the benchmark names.
const (
	Redlock         = "redlock"
	RedlockFencing  = "redlock+fencing"
	RedlockGuard    = "redlock+guard"
	Redsync         = "redsync"
	RedsyncFailFast = "redsync-failfast"
	Redislock       = "redislock"
	Rueidislock     = "rueidislock"
	// Floor is no lock: two rounds of PING per Obtain+Release, the least
	// the servers allow (see floorImpl).
	Floor = "floor"
)

// A Mode is an implementation over a number of nodes.
type Mode struct {
	// Impl is the implementation's name.
	Impl string
	// Nodes is how many nodes it uses: the first Nodes clients given to New.
	Nodes int
}

// Name is "impl=<impl>/nodes=<n>", the form of the benchmark names.
func (m Mode) Name() string { return fmt.Sprintf("impl=%s/nodes=%d", m.Impl, m.Nodes) }

// Quorum reports whether the mode spreads the lock over several nodes.
func (m Mode) Quorum() bool { return m.Nodes > 1 }

// Excludes reports whether the mode is a lock at all: false for the floor,
// which has nothing to contend for.
func (m Mode) Excludes() bool { return m.Impl != Floor }

// Ours reports whether the mode is this library (plain, fenced or
// guarded), whose every call is a script on each node.
func (m Mode) Ours() bool {
	return m.Impl == Redlock || m.Impl == RedlockFencing || m.Impl == RedlockGuard
}

// Modes returns the modes the harness compares, in table order: each group
// of node counts led by its floor.
func Modes() []Mode {
	return []Mode{
		{Floor, 1},
		{Redlock, 1},
		{Redislock, 1},
		{Rueidislock, 1},
		{Redlock, 3},
		{Floor, 5},
		{Redlock, 5},
		{RedlockFencing, 5},
		{RedlockGuard, 5},
		{Redsync, 5},
		{RedsyncFailFast, 5},
	}
}

// ScalingByWorkers returns the modes whose throughput the scaling scenario
// measures against the number of workers: ours and each peer in the node
// count it is meant for, and the floors.
func ScalingByWorkers() []Mode {
	return []Mode{
		{Floor, 1},
		{Redlock, 1},
		{Redislock, 1},
		{Rueidislock, 1},
		{Floor, 5},
		{Redlock, 5},
		{Redsync, 5},
	}
}

// ScalingByNodes returns the implementations whose throughput the scaling
// scenario measures against the number of nodes; the single-node ones
// (see Supports) appear only at one node.
func ScalingByNodes() []string {
	return []string{Floor, Redlock, Redsync, Redislock, Rueidislock}
}

// Supports reports whether New accepts impl over nodes nodes: redsync
// wants several, bsm/redislock and rueidislock exactly one.
func Supports(impl string, nodes int) bool {
	switch impl {
	case Redsync, RedsyncFailFast:
		return nodes > 1
	case Redislock, Rueidislock:
		return nodes == 1
	}
	return nodes >= 1
}

// New sets up the mode over the first m.Nodes clients. The clients stay the
// caller's.
func New(m Mode, clients []redis.UniversalClient) (Impl, error) {
	if m.Nodes < 1 || len(clients) < m.Nodes {
		return nil, fmt.Errorf("lockers: %s needs %d clients, have %d", m.Name(), m.Nodes, len(clients))
	}
	clients = clients[:m.Nodes]
	switch m.Impl {
	case Redlock, RedlockFencing, RedlockGuard:
		var opts []redlock.Option
		switch m.Impl {
		case RedlockFencing:
			opts = append(opts, redlock.WithFencing())
		case RedlockGuard:
			// The guard's maximum TTL is the TTL every mode uses.
			opts = append(opts, redlock.WithRestartGuard(TTL))
		}
		plain, err := plainClients(clients)
		if err != nil {
			return nil, err
		}
		// The fault scenarios take nodes out on purpose: no warnings.
		l, err := redlock.New(plain, append(opts, redlock.WithLogger(slog.New(slog.DiscardHandler)))...)
		if err != nil {
			return nil, err
		}
		if m.Impl == RedlockGuard {
			// Seed the markers as an operator does once at setup, so the
			// nodes vote at once.
			// A first contact costs a connection's set-up round trip,
			// which a busy machine may not fit in the node timeout: try
			// again, as an operator would, for a few seconds.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for {
				err := l.Bootstrap(ctx)
				if err == nil {
					break
				}
				if ctx.Err() != nil || !errors.Is(err, redlock.ErrNoQuorum) {
					return nil, errors.Join(err, l.Close())
				}
			}
		}
		return ourImpl{l}, nil
	case Redsync, RedsyncFailFast:
		if m.Nodes == 1 {
			// One pool would make redsync a single-node lock with a
			// quorum of one, which is not how it is meant to be used.
			return nil, fmt.Errorf("lockers: %s wants several nodes", m.Impl)
		}
		pools := make([]redsyncredis.Pool, len(clients))
		for i, c := range clients {
			pools[i] = goredis.NewPool(c)
		}
		impl := &redsyncImpl{rs: redsync.New(pools...)}
		if m.Impl == RedsyncFailFast {
			impl.opts = append(impl.opts, redsync.WithFailFast(true))
			// With fail-fast, UnlockContext returns while its calls to
			// the slower nodes still read the Mutex's value; locking the
			// same Mutex again then races with them (the race detector
			// reports it). A fresh Mutex per lock is the safe use.
			impl.freshMutex = true
		}
		return impl, nil
	case Redislock:
		if m.Nodes != 1 {
			return nil, fmt.Errorf("lockers: %s is single-node", m.Impl)
		}
		return redislockImpl{redislock.New(clients[0])}, nil
	case Rueidislock:
		if m.Nodes != 1 {
			return nil, fmt.Errorf("lockers: %s is single-node here (one key, KeyMajority 1)", m.Impl)
		}
		return newRueidis(clients[0])
	case Floor:
		return &floorImpl{clients: clients}, nil
	}
	return nil, fmt.Errorf("lockers: unknown implementation %q", m.Impl)
}

// ourImpl is this project's redlock.Locker with its defaults: TTL 8s, node
// timeout 50ms, exponential backoff from 8ms to 512ms, waiters woken when
// the holder releases.
type ourImpl struct{ l *redlock.Locker }

func (o ourImpl) NewWorker() Worker { return &ourWorker{l: o.l} }
func (o ourImpl) Close() error      { return o.l.Close() }

type ourWorker struct {
	l    *redlock.Locker
	held *redlock.Lock
}

func (w *ourWorker) Lock(ctx context.Context, key string, wait bool) error {
	var err error
	if wait {
		w.held, err = w.l.Obtain(ctx, key)
	} else {
		w.held, err = w.l.TryObtain(ctx, key)
	}
	return err
}

func (w *ourWorker) Unlock(ctx context.Context) error {
	if w.held == nil {
		return errNotLocked
	}
	err := w.held.Release(ctx)
	w.held = nil
	return err
}

// redsyncImpl is go-redsync/redsync/v4 over its go-redis v9 pools, with its
// defaults (expiry 8s, 32 tries 50–250ms apart, per-node timeout 5% of the
// expiry) and optionally WithFailFast.
type redsyncImpl struct {
	rs         *redsync.Redsync
	opts       []redsync.Option
	freshMutex bool
}

func (r *redsyncImpl) NewWorker() Worker { return &redsyncWorker{impl: r} }
func (r *redsyncImpl) Close() error      { return nil }

// redsyncWorker keeps its Mutex while it locks the same key, as a user
// holding a mutex per resource would (except with fail-fast, see New); a
// Mutex is not safe for concurrent use, so workers never share one.
type redsyncWorker struct {
	impl   *redsyncImpl
	m      *redsync.Mutex
	locked bool
}

func (w *redsyncWorker) Lock(ctx context.Context, key string, wait bool) error {
	if w.m == nil || w.m.Name() != key || w.impl.freshMutex {
		w.m = w.impl.rs.NewMutex(key, w.impl.opts...)
	}
	var err error
	if wait {
		err = w.m.LockContext(ctx)
	} else {
		err = w.m.TryLockContext(ctx)
	}
	w.locked = err == nil
	return err
}

func (w *redsyncWorker) Unlock(ctx context.Context) error {
	if !w.locked {
		return errNotLocked
	}
	w.locked = false
	ok, err := w.m.UnlockContext(ctx)
	if !ok && err == nil {
		err = errors.New("redsync: unlock failed")
	}
	return err
}

// redislockImpl is bsm/redislock on one node.
type redislockImpl struct{ c *redislock.Client }

func (r redislockImpl) NewWorker() Worker { return &redislockWorker{c: r.c} }
func (r redislockImpl) Close() error      { return nil }

type redislockWorker struct {
	c    *redislock.Client
	held *redislock.Lock
}

func (w *redislockWorker) Lock(ctx context.Context, key string, wait bool) error {
	var opt *redislock.Options // nil: one attempt, the library's default
	if wait {
		// redislock does not retry unless told to; give it the same
		// backoff as redlock's default. Its strategies keep state, so each
		// call needs a fresh one.
		opt = &redislock.Options{RetryStrategy: redislock.ExponentialBackoff(8*time.Millisecond, 512*time.Millisecond)}
	}
	var err error
	w.held, err = w.c.Obtain(ctx, key, TTL, opt)
	return err
}

func (w *redislockWorker) Unlock(ctx context.Context) error {
	if w.held == nil {
		return errNotLocked
	}
	err := w.held.Release(ctx)
	w.held = nil
	return err
}

var errNotLocked = errors.New("lockers: unlock without a lock")

// plainClients returns clients as the *redis.Client values that redlock.New
// takes (the harness makes nothing else).
func plainClients(clients []redis.UniversalClient) ([]*redis.Client, error) {
	plain := make([]*redis.Client, len(clients))
	for i, c := range clients {
		p, ok := c.(*redis.Client)
		if !ok {
			return nil, fmt.Errorf("lockers: client %d is a %T, not a *redis.Client", i, c)
		}
		plain[i] = p
	}
	return plain, nil
}
