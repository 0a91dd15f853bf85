package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/scripts"

	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/quorum"
)

// Multi-key locks: several keys taken as one lock. On each node the keys are
// taken in one script, all or none (acquire_multi.lua), so an attempt never
// holds some keys while it waits for others: two callers whose key sets
// overlap, given in any order, cannot deadlock; at worst their votes split,
// both undo and retry after a jittered delay, as two single-key callers do.
// The lock is one Lock: one token, one validity, and one round per
// Release, Extend or TTL that acts on all its keys on each node (multi.lua).

// MaxMultiKeys bounds the keys of one multi-key lock: each attempt sends
// all of them to every node in one script, which blocks the node while it
// runs.
const MaxMultiKeys = 64

// Keys returns the lock's keys: the one key of a lock from Obtain, every key
// of one from ObtainMulti, in the order given.
func (k *Lock) Keys() []string { return slices.Clone(k.keys) }

// multi reports whether the lock holds several keys.
func (k *Lock) multi() bool { return len(k.keys) > 1 }

// multiCall turns a single-key compare script call on several keys into
// the call of multi.lua that runs it for each; other calls are unchanged.
func multiCall(s *scripts.Script, keys []string, args []any) (*scripts.Script, []any) {
	if len(keys) < 2 {
		return s, args
	}
	var op string
	switch s {
	case scripts.Release:
		op = "release"
		args = slices.Clone(args)
		if args[1] != "" {
			// Each key's release is announced on its own channel.
			args[1] = releasePrefix
		}
		// A release needs no nonce (once.lua): a second copy finds our
		// hold gone.
		args = append(args, "", 0)
	case scripts.Extend:
		op = "extend"
	case scripts.PTTL:
		op = "pttl"
	default:
		return s, args
	}
	return scripts.Multi, append([]any{op}, args...)
}

// multiConfig checks the keys and options of a multi-key call and returns
// the call's config. The lock's name is the keys joined by commas.
func (l *Locker) multiConfig(keys []string, opts []Option) (config, error) {
	switch {
	case len(keys) == 0:
		return config{}, invalid("no keys")
	case len(keys) > MaxMultiKeys:
		return config{}, invalid("%d keys, more than the %d a multi-key lock takes", len(keys), MaxMultiKeys)
	}
	seen := make(map[string]struct{}, len(keys))
	for i, key := range keys {
		if err := checkKey(key); err != nil {
			return config{}, err
		}
		if _, dup := seen[key]; dup {
			return config{}, invalid("key %s is given twice (at %d)", quoteKey(key), i)
		}
		seen[key] = struct{}{}
	}
	cfg, err := l.callConfig(keys[0], opts)
	if err != nil {
		return cfg, err
	}
	switch {
	case cfg.tokenSet && len(keys) > 1:
		return cfg, invalid("WithToken takes one key: a multi-key lock is never a re-entry")
	case cfg.fencing && len(keys) > 1:
		return cfg, invalid("WithFencing takes one key: a multi-key lock has no fencing token")
	}
	return cfg, nil
}

// ObtainMulti acquires one lock on all of keys together, or on none,
// retrying as Obtain does (WithRetry, until ctx ends), and waking when any of
// the keys is released. Each node takes all the keys in one atomic step, or
// none if any is held, so callers with overlapping key sets, in any order,
// never deadlock: no attempt holds a key while it waits for another.
//
// The lock has one token and one validity for all keys; its Release,
// ReleaseAfter, Extend, KeepAlive and TTL act on all of them together, each
// node in one step, and it is held (Extend, TTL) only where every key is
// ours. Keys returns the keys, Key the keys joined by commas (for
// messages).
//
// The keys are checked as Obtain checks a key; an empty list, more than
// MaxMultiKeys keys, or a key given twice fails with an error matching
// ErrInvalid, as do WithToken (a multi-key lock is never a re-entry) and
// WithFencing (it has no fencing token), before any node is asked. One key
// is an Obtain of that key.
//
// On failure it returns no lock, leaves none of the keys of its own on any
// node (late replies are cleaned up in the background), and an error as
// Obtain's: ErrNotObtained when keys held by others keep a majority out of
// reach, ErrNoQuorum on an outage, with ctx.Err() when ctx ended.
func (l *Locker) ObtainMulti(ctx context.Context, keys []string, opts ...Option) (lock *Lock, err error) {
	if len(keys) == 1 {
		return l.Obtain(ctx, keys[0], opts...)
	}
	name := strings.Join(keys, ",")
	ctx, tr := l.cfg.obs.begin(ctx, OpObtain, name)
	defer func() { tr.obtained(ctx, lock, err) }()
	cfg, err := l.multiConfig(keys, opts)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, notTried(ctx, name)
	}
	keys = slices.Clone(keys)
	seq := cfg.retry.Start()
	var (
		timer *time.Timer
		wake  <-chan struct{}
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if wake != nil {
			select {
			case <-wake: // stale: from before this attempt
			default:
			}
		}
		began := tr.now()
		lock, aerr := l.attemptMulti(ctx, keys, name, &cfg)
		tr.attempted(began)
		if errors.Is(aerr, errNotTried) && err != nil {
			return nil, withContext(ctx, err)
		}
		if aerr == nil {
			return lock, nil
		}
		err = aerr
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return nil, withContext(ctx, err)
		}
		wait, ok := seq.Next()
		if !ok {
			return nil, err
		}
		var qe *QuorumError
		if errors.Is(err, ErrNotObtained) && errors.As(err, &qe) {
			if free, known := qe.freeIn(); known {
				if dl, has := ctx.Deadline(); cfg.failFast && has && time.Until(dl) < free {
					return nil, err
				}
				wait = min(wait, free+time.Millisecond)
			}
			if wake == nil && !cfg.pollingOnly {
				var stop func()
				wake, stop = l.listenAll(ctx, keys, cfg.nodeTimeout)
				defer stop()
				// A release may have come before the subscriptions did.
				continue
			}
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		slept := tr.now()
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-wake:
		}
		tr.waited(ctx, slept)
		if ctx.Err() != nil {
			return nil, withContext(ctx, err)
		}
	}
}

// TryObtainMulti makes exactly one attempt to acquire one lock on all of
// keys, whatever the retry strategy; otherwise it is ObtainMulti.
func (l *Locker) TryObtainMulti(ctx context.Context, keys []string, opts ...Option) (lock *Lock, err error) {
	if len(keys) == 1 {
		return l.TryObtain(ctx, keys[0], opts...)
	}
	name := strings.Join(keys, ",")
	ctx, tr := l.cfg.obs.begin(ctx, OpObtain, name)
	defer func() { tr.obtained(ctx, lock, err) }()
	cfg, err := l.multiConfig(keys, opts)
	if err != nil {
		return nil, err
	}
	began := tr.now()
	lock, err = l.attemptMulti(ctx, slices.Clone(keys), name, &cfg)
	tr.attempted(began)
	if err != nil && ctx.Err() != nil {
		err = withContext(ctx, err)
	}
	return lock, err
}

// listenAll registers for release notifications of every key; the returned
// channel gets a value when any is released. stop ends it.
func (l *Locker) listenAll(ctx context.Context, keys []string, timeout time.Duration) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	var (
		wg    sync.WaitGroup
		stops []func()
	)
	for _, key := range keys {
		w, stop := l.notify.wait(ctx, key, timeout)
		stops = append(stops, stop)
		wg.Go(func() {
			for {
				select {
				case <-w:
					select {
					case out <- struct{}{}:
					default:
					}
				case <-done:
					return
				}
			}
		})
	}
	return out, func() {
		close(done)
		wg.Wait()
		for _, stop := range stops {
			stop()
		}
	}
}

// newMultiPlan is newPlan for several keys: acquire_multi.lua's keys and
// arguments, with a fresh token.
func newMultiPlan(keys []string, cfg *config) acquirePlan {
	prefix := uuid.NewString() + "\x00"
	value := prefix + "1\x00" + cfg.metadata
	all := slices.Clone(keys)
	args := []any{len(keys), value, serverMillis(cfg.serverTTL()), prefix}
	if cfg.guard > 0 {
		all = append(all, guardMarker, guardQuarantine)
		args = append(args, "0", serverMillis(cfg.guard), serverMillis(cfg.fenceLifetime()))
	}
	return acquirePlan{token: strings.TrimSuffix(prefix, "\x00"), holder: holder{prefix: prefix, hold: "1"}, keys: all, lockKeys: all[:len(keys)], args: args}
}

// attemptMulti is attempt for several keys: one round of
// acquire_multi.lua, concluded (or undone on every key) as attempt's is.
func (l *Locker) attemptMulti(ctx context.Context, keys []string, name string, cfg *config) (*Lock, error) {
	if ctx.Err() != nil {
		return nil, notTried(ctx, name)
	}
	release, err := l.guard()
	if err != nil {
		return nil, err
	}
	defer release()
	p := newMultiPlan(keys, cfg)
	late := l.settler(&p, cfg.nodeTimeout)
	var validity time.Duration
	start := cfg.clock.Now()
	res := quorum.Run(ctx, &quorum.Round[int64]{
		Nodes:   len(l.nodes),
		Need:    l.need,
		Timeout: cfg.nodeTimeout,
		// A refusal still to come may tell contention from outage.
		Classify: true,
		Start:    l.observeNodes(scripts.AcquireMulti, name, l.sender(cfg.nodeTimeout, scripts.AcquireMulti.Guarded(cfg.guard > 0), p.keys, p.args, decodeAcquire, nil)),
		Accept: func(*quorum.Result[int64]) bool {
			validity = clock.Validity(cfg.ttl, cfg.clock.Since(start), cfg.driftFactor)
			return validity > 0
		},
		Late:       func(r quorum.Reply[int64], _ bool) { late.arrived(r) },
		Background: &l.bg,
	})
	return l.conclude(ctx, name, cfg, &p, &res, start, validity, late, "")
}
