package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Bootstrap seeds the restart guard's marker on every node so that a fresh
// cluster votes at once; run it once, at set-up (docs/safety.md#bootstrap).
// It seeds no node that abstains, and fails with ErrNoQuorum, naming the
// nodes, unless every node was reached and none abstains.
func (l *Locker) Bootstrap(ctx context.Context, opts ...BootstrapOption) error {
	var bc bootstrapConfig
	for _, o := range opts {
		if o == nil {
			return invalid("nil BootstrapOption")
		}
		o(&bc)
	}
	args := []any{max(l.cfg.guard, 0).Milliseconds()}
	if bc.clear {
		if err := l.noLockKeys(ctx); err != nil {
			return err
		}
		args = append(args, "1")
	}
	if !l.cfg.layout.Clustered() {
		return l.bootstrapSlot(ctx, "", args)
	}
	return l.bootstrapSlots(ctx, args)
}

// bootstrapSlots seeds the marker of every slot (a cluster keeps one per
// slot, see wire.Layout), a bounded number of slots at a time, and
// returns the first slot's failure.
func (l *Locker) bootstrapSlots(ctx context.Context, args []any) error {
	const parallel = 32
	slots := make(chan int)
	errs := make(chan error, parallel)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for s := range slots {
				if err := l.bootstrapSlotRetried(ctx, wire.SlotTag(s), args); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for s := range wire.Slots {
		select {
		case slots <- s:
		case err = <-errs:
			break feed
		}
	}
	close(slots)
	wg.Wait()
	close(errs)
	if err != nil {
		return err
	}
	return <-errs // nil when the channel is empty
}

// slotTries is how often Bootstrap asks for one slot's marker before it
// fails: 16384 rounds on a busy machine may see a node timeout or two,
// and seeding again is harmless (bootstrap.lua keeps a marker that is
// there).
const slotTries = 3

// bootstrapSlotRetried is bootstrapSlot, tried up to slotTries times.
func (l *Locker) bootstrapSlotRetried(ctx context.Context, key string, args []any) error {
	var err error
	for range slotTries {
		if err = l.bootstrapSlot(ctx, key, args); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// bootstrapSlot seeds the marker that calls on key read (any key of its
// slot on a cluster) on every node.
func (l *Locker) bootstrapSlot(ctx context.Context, key string, args []any) error {
	marker, quarantine := l.cfg.guardKeys(key)
	keys := []string{marker, quarantine}
	timeout := l.cfg.nodeTimeout
	res, err := l.call(ctx, round[int64]{
		need:    len(l.nodes),
		timeout: timeout,
		waitAll: true,
		start:   l.sender(timeout, scriptCall{script: scripts.Bootstrap, keys: keys, args: args}, decodeBootstrap, nil),
	})
	if err != nil {
		return err
	}
	if res.OK {
		return nil
	}
	qe := l.roundError("bootstrap", "", &res, compareOutcome, ErrNoQuorum)
	qe.Need = len(l.nodes) // every node, not a majority
	return withContext(ctx, qe)
}

// BootstrapOption changes what Bootstrap does.
type BootstrapOption func(*bootstrapConfig)

type bootstrapConfig struct{ clear bool }

// ClearQuarantine states that no lock is held: Bootstrap then also ends the
// quarantines and stamps the nodes anew, after searching every node for a
// lock's key. It fails with ErrInvalid (naming the node and key) if it
// finds one, with ErrNoQuorum (ErrMisconfigured if refused for good) if a
// node cannot be searched (docs/safety.md#bootstrap).
func ClearQuarantine() BootstrapOption { return func(c *bootstrapConfig) { c.clear = true } }

// noLockKeys searches every node for a key that holds a lock; see
// ClearQuarantine.
func (l *Locker) noLockKeys(ctx context.Context) error {
	release, err := l.guard()
	if err != nil {
		return err
	}
	defer release()
	for i := range l.nodes {
		key, err := l.lockKeyOn(ctx, i)
		addr := conn.SingleLine(l.nodes[i].addr)
		switch {
		case err != nil:
			reason := ErrNoQuorum
			if conn.Permanent(err) {
				reason = ErrMisconfigured
			}
			return withContext(ctx, fmt.Errorf("%w: bootstrap: cannot search %s for lock keys: %s", reason, addr, nodeErrText(err)))
		case key != "":
			return invalid("bootstrap: %s holds %s: a lock may be held, so no quarantine is cleared", addr, describeHold(key))
		}
	}
	return nil
}

// lockKeyOn returns a key of node i (any master of a cluster) that holds
// a lock, "" when none does.
func (l *Locker) lockKeyOn(ctx context.Context, i int) (string, error) {
	masters, err := l.nodes[i].pipe.Masters(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range masters {
		var cursor uint64
		for {
			found, next, err := l.scanLockKeys(ctx, c, cursor)
			if err != nil || found != "" {
				return found, err
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return "", nil
}

// scanLockKeys runs one SCAN step from cursor and reads the string keys it
// returns, within one node timeout.
func (l *Locker) scanLockKeys(ctx context.Context, c *redis.Client, cursor uint64) (string, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.nodeTimeout)
	defer cancel()
	keys, next, err := c.ScanType(ctx, cursor, "", 1000, "string").Result()
	if err != nil {
		return "", 0, err
	}
	// Every kind of key that can be a hold (wire.Kind.Holds): a lock key,
	// a permit, a reader's lease.
	keys = slices.DeleteFunc(keys, func(k string) bool { return !wire.KindOf(k).Holds() })
	gets := make([]*redis.StringCmd, len(keys))
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, k := range keys {
			gets[j] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		// A key gone since the SCAN is no error.
		return "", 0, err
	}
	for j, g := range gets {
		if v, err := g.Result(); err == nil && wire.IsLockValue(v) {
			return keys[j], 0, nil
		}
	}
	return "", next, nil
}
