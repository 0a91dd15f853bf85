package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// slotBatch is how many slots' guard keys one pipeline reads: 2 commands
// each, a few hundred KB of reply at most.
const slotBatch = 1024

// readSlotGuards reads the restart guard's marker and quarantine of every
// slot in guardSlots, pipelined, and sums them up in the node's guard
// state (see GuardState.Slots); it reports false when the node stopped
// answering. Reading them all costs 2 round trips per batch: exact
// counts, where a sample could miss the one slot that lost its memory.
func (p *nodeProbe) readSlotGuards(ctx context.Context, c *redis.Client, timeout time.Duration, info map[string]string) bool {
	r := &p.rep
	run, evicted := info["run_id"], info["evicted_keys"]
	if run == "" || evicted == "" {
		r.GuardErr = errors.New("INFO shows no run_id or evicted_keys")
		return true
	}
	g := GuardState{Slots: len(p.guardSlots)}
	for start := 0; start < len(p.guardSlots); start += slotBatch {
		batch := p.guardSlots[start:min(start+slotBatch, len(p.guardSlots))]
		markers := make([]*redis.StringCmd, len(batch))
		quarantines := make([]*redis.DurationCmd, len(batch))
		err := checkCall(ctx, timeout, func(ctx context.Context) error {
			pl := c.Pipeline()
			for i, s := range batch {
				tag := wire.SlotTag(s)
				markers[i] = pl.Get(ctx, wire.Clustered.GuardMarker(tag))
				quarantines[i] = pl.PTTL(ctx, wire.Clustered.GuardQuarantine(tag))
			}
			_, err := pl.Exec(ctx)
			return err
		})
		if !isReply(err) {
			r.Err = err
			return false
		}
		for i, s := range batch {
			if err := g.tally(markers[i], quarantines[i], run, evicted); err != nil {
				// A refusal, or the slot moved since the map was read.
				r.GuardErr = fmt.Errorf("slot %d: %w", s, err)
				return true
			}
		}
	}
	g.Known, g.Marker = true, g.Unmarked == 0
	g.Current = g.Marker && g.StaleSlots == 0
	r.Guard = g
	return true
}

// tally counts one slot's marker and quarantine in g.
func (g *GuardState) tally(marker *redis.StringCmd, quarantine *redis.DurationCmd, run, evicted string) error {
	stamp, err := marker.Result()
	switch {
	case errors.Is(err, redis.Nil):
		g.Unmarked++
	case err != nil:
		return err
	default:
		if why := staleness(stamp, run, evicted); why != "" {
			if g.StaleSlots++; g.Stale == "" {
				g.Stale = why
			}
		}
	}
	q, err := quarantine.Result()
	if err != nil {
		return err
	}
	if q > 0 {
		g.Abstaining++
		g.Abstain = max(g.Abstain, q)
	}
	return nil
}

// slotGuardState is the guard's finding on a node that keeps its state per
// slot, once it was read: how many slots abstain, have a stale marker or
// none.
func (a *nodeAssessment) slotGuardState() {
	g := a.n.Guard
	of := fmt.Sprintf("of its %d slots", g.Slots)
	switch {
	case g.Abstaining > 0:
		a.add(Guard, Warning, fmt.Sprintf("%d %s abstain, for up to %s more: they lost their memory (restart, reload, promotion, eviction or flush)",
			g.Abstaining, of, g.Abstain.Round(time.Millisecond)),
			"none: each votes again when its quarantine ends (bootstrap does not shorten it)")
	case g.StaleSlots > 0:
		a.add(Guard, Warning, fmt.Sprintf("%d %s have a stale marker: %s; each abstains for the maximum TTL at its next guarded acquisition", g.StaleSlots, of, g.Stale),
			"none: each votes again a maximum TTL after that; or start the wait now with bootstrap (with --restart-guard)")
	case g.Unmarked > 0 && a.fresh:
		a.add(Guard, Warning, fmt.Sprintf("no marker in any %s (a fresh deployment): bootstrap needed, or each slot abstains for the maximum TTL at first use", of),
			"redlock bootstrap (Locker.Bootstrap), once, on the fresh deployment")
	case g.Unmarked > 0:
		a.add(Guard, Warning, fmt.Sprintf("%d %s have no marker while others have theirs: they lost their memory (flush, restart without persistence) or were never seeded; each abstains for the maximum TTL at its next guarded acquisition", g.Unmarked, of),
			"none: each votes again a maximum TTL after that; do not bootstrap while locks it granted may still be held")
	default:
		a.add(Guard, OK, fmt.Sprintf("markers of all %d slots current: the node votes", g.Slots), "")
	}
}
