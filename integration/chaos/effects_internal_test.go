package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/redlock"
)

// TestStoppedCarefulWriterLosesNoUpdate plays, step by step, what the
// client-pause scenarios do by chance: a careful holder looks at its
// deadline, finds room, and is stopped (SIGSTOP, or a machine at load 30)
// before its write lands; its lock expires, the next holder reads and
// writes, and then the stopped write lands. No lock can prevent that; in a
// fenced scenario that stops clients the write must be fence-checked, so
// that the store turns it away instead of losing the next holder's update.
// The scenarios whose resource is PostgreSQL turn it away through the
// fenced package's SQL helper, at READ COMMITTED and REPEATABLE READ.
func TestStoppedCarefulWriterLosesNoUpdate(t *testing.T) {
	for _, name := range []string{"client-pause", "mixed-persistent", "client-pause-pg", "minority-restart-unpersisted-pg", "clock-rate-beyond-drift-pg"} {
		t.Run(name, func(t *testing.T) {
			var sc Scenario
			for _, s := range Scenarios {
				if s.Name == name {
					sc = s
				}
			}
			cfg := DefaultConfig()
			// Slack for a loaded machine running -race: the steps
			// below must not fail for want of a quorum.
			cfg.TTL, cfg.NodeTimeout = time.Second, 500*time.Millisecond
			sc.configure(&cfg)
			if !cfg.Fencing {
				t.Fatalf("%s: fencing off", name)
			}
			c, err := cluster.Start(t.Context(), cluster.Processes{}, 3, sc.Cluster)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := c.Close(context.Background()); err != nil {
					t.Error(err)
				}
			})
			addr, stop, err := startEffectsStore(cfg.Resource)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := stop(); err != nil {
					t.Error(err)
				}
			})
			hist := checker.NewHistory(time.Now())
			w := newWorkload(c, &cfg, hist, nil, [2]uint64{1, 2})
			if w.fx, err = openEffects(&cfg, addr); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := w.fx.Close(); err != nil {
					t.Error(err)
				}
			})
			if m, ok := w.fx.(*checker.SQLStore); ok {
				if err := m.Migrate(t.Context()); err != nil {
					t.Fatal(err)
				}
			}

			err = withLocker(c.ServerAddrs(), &cfg, func(l *redlock.Locker) error {
				ctx := t.Context()
				octx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				a, err := l.Obtain(octx, "k", redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond)))
				if err != nil {
					return err
				}
				// As carefulEffect does, with the stop between its last
				// look at the deadline (room) and its write.
				w.effect(ctx, 0, a, w.cfg.CheckedEffects, func() bool {
					time.Sleep(time.Until(a.Until()) + cfg.TTL/10)
					b, err := l.Obtain(octx, "k", redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond)))
					if err != nil {
						t.Errorf("the next holder: %v", err)
						return true
					}
					w.effect(ctx, 1, b, w.cfg.CheckedEffects, func() bool { return true })
					if err := b.Release(ctx); err != nil {
						t.Error(err)
					}
					return true // room was found before the stop
				})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			fx, err := w.fx.Effects(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if fx.LostUpdates != 0 || fx.LateLost != 0 || fx.Writes != 1 || fx.StaleWrites != 1 {
				t.Errorf("effects: %v; want the next holder's write only, and the stopped one rejected as stale", fx)
			}
			r := checker.Check(hist)
			for op, kinds := range r.Failures {
				t.Errorf("failures of %s: %v", op, kinds)
			}
		})
	}
}
