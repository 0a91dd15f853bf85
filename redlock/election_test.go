package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// electOpts give leaderships a TTL that a loaded machine extends in time.
var electOpts = []redlock.Option{redlock.WithTTL(2 * time.Second), redlock.WithNodeTimeout(300 * time.Millisecond)}

// subscribed waits until every node has n subscribers on name's release
// channel: the campaigners (or observers) are listening.
func (c *cluster) subscribed(t *testing.T, name string, n int64) {
	t.Helper()
	err := redistest.Eventually(t, 10*time.Second, func() error {
		for i, cl := range c.clients {
			got, err := cl.PubSubNumSub(t.Context(), "redlock:released:"+name).Result()
			if err != nil {
				return err
			}
			if got["redlock:released:"+name] < n {
				return fmt.Errorf("node %d has %d subscribers, want %d", i, got["redlock:released:"+name], n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Campaigners take turns on an election; each leads for a moment, then
// resigns or (now and then) dies: its Locker closes without resigning, as
// its process would. Whenever a campaigner starts to lead, the previous
// leader's context has ended already (no two lead at once, also when one
// died), and its term is higher than the previous leader's.
func TestCampaignOneLeaderAtATime(t *testing.T) {
	c := newCluster(t, 3)
	const campaigners, rounds = 4, 6
	var (
		current atomic.Pointer[redlock.Leadership]
		terms   atomic.Int32
		deaths  atomic.Int32
		wg      sync.WaitGroup
	)
	for w := range campaigners {
		wg.Go(func() {
			l := c.locker(t, electOpts...)
			for r := range rounds {
				ld, err := l.Campaign(t.Context(), "e", redlock.WithMetadata(fmt.Sprint("campaigner ", w)))
				if err != nil {
					t.Error(err)
					return
				}
				if prev := current.Swap(ld); prev != nil {
					if prev.Context().Err() == nil {
						t.Errorf("term %d leads while term %d's context is live", ld.Term(), prev.Term())
					}
					if ld.Term() <= prev.Term() {
						t.Errorf("term %d after term %d", ld.Term(), prev.Term())
					}
				}
				terms.Add(1)
				if ld.Metadata() != fmt.Sprint("campaigner ", w) {
					t.Errorf("metadata %q", ld.Metadata())
				}
				// Work for a moment, watching the leader's context.
				select {
				case <-ld.Context().Done():
					t.Errorf("campaigner %d lost its leadership: %v", w, context.Cause(ld.Context()))
				case <-time.After(time.Duration(r%3) * 5 * time.Millisecond):
				}
				if (w+r)%7 == 6 {
					// Die: the keys stay until they expire; the leader's
					// context ends, with ErrLockLost, before that.
					deaths.Add(1)
					if err := l.Close(); err != nil {
						t.Error(err)
					}
					<-ld.Context().Done()
					if cause := context.Cause(ld.Context()); !errors.Is(cause, redlock.ErrLockLost) {
						t.Errorf("a dead leader's context ended with %v", cause)
					}
					l = c.locker(t, electOpts...)
					continue
				}
				// A loaded machine may miss a node's answer: the keys
				// left there expire, nothing worse.
				if err := ld.Resign(t.Context()); err != nil && !errors.Is(err, redlock.ErrNoQuorum) {
					t.Error(err)
				}
				if ld.Context().Err() == nil {
					t.Error("Resign left the leader's context live")
				}
			}
		})
	}
	wg.Wait()
	if n := terms.Load(); n != campaigners*rounds {
		t.Errorf("%d terms, want %d", n, campaigners*rounds)
	}
	t.Logf("%d terms, %d of them ended by a dead leader", terms.Load(), deaths.Load())
}

// A leader whose Locker closes without resigning (its process going away)
// is told it lost leadership before its validity ends, and another
// campaigner leads within the leader's TTL, with a higher term.
func TestCampaignReplacesDeadLeaderWithinTTL(t *testing.T) {
	c := newCluster(t, 3)
	l, err := redlock.New(c.clients, electOpts...)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Campaign(t.Context(), "e")
	if err != nil {
		t.Fatal(err)
	}
	b := c.locker(t, electOpts...)
	won := make(chan *redlock.Leadership, 1)
	go func() {
		ld, err := b.Campaign(t.Context(), "e")
		if err != nil {
			t.Error(err)
		}
		won <- ld
	}()
	c.subscribed(t, "e", 1)
	died := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ld := <-won
	if ld == nil {
		return
	}
	after := time.Since(died)
	// Checked at once: the old leader's work must have been told by now.
	if cause := context.Cause(a.Context()); !errors.Is(cause, redlock.ErrLockLost) {
		t.Errorf("the new leader leads while the old one's context says %v", cause)
	}
	// The TTL from the last extension (before the close), plus slack for
	// the waiter's wake-up and round trips on a loaded machine.
	if after > 2*time.Second+500*time.Millisecond {
		t.Errorf("new leader after %v, want within the TTL 2s", after)
	}
	if ld.Term() <= a.Term() {
		t.Errorf("term %d after %d", ld.Term(), a.Term())
	}
	t.Logf("replaced %v after the leader's Locker closed", after)
	if err := ld.Resign(t.Context()); err != nil {
		t.Error(err)
	}
	if err := a.Resign(t.Context()); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("Resign of the dead leader: %v, want ErrClosed", err)
	}
}

// A leader cut off from a majority (two of three nodes stopped) learns of
// it through its context, before its validity ends; once the nodes are
// back, another campaigner leads with a higher term.
func TestCampaignLeaderLosesStoppedNodes(t *testing.T) {
	c := newCluster(t, 3)
	a, err := c.locker(t, electOpts...).Campaign(t.Context(), "e")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.servers[1:] {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	resumed := false
	resume := func() {
		if resumed {
			return
		}
		resumed = true
		for _, s := range c.servers[1:] {
			if err := s.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	select {
	case <-a.Context().Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the leader's context outlived its TTL with two of three nodes stopped")
	}
	if time.Now().After(a.Until()) {
		t.Errorf("told %v after the leadership's validity ended", time.Since(a.Until()))
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, redlock.ErrLockLost) {
		t.Errorf("cause %v, want ErrLockLost", cause)
	}
	resume()
	b, err := c.locker(t, electOpts...).Campaign(t.Context(), "e")
	if err != nil {
		t.Fatal(err)
	}
	if b.Term() <= a.Term() {
		t.Errorf("term %d after %d", b.Term(), a.Term())
	}
	if err := b.Resign(t.Context()); err != nil {
		t.Error(err)
	}
	if err := a.Resign(t.Context()); !errors.Is(err, redlock.ErrLockNotHeld) {
		t.Errorf("Resign of the lost leadership: %v, want ErrLockNotHeld", err)
	}
}

// Resign hands over at once: a waiting campaigner leads within
// milliseconds, far sooner than the leader's keys would expire.
func TestResignHandsOverAtOnce(t *testing.T) {
	c := newCluster(t, 3)
	opts := []redlock.Option{redlock.WithTTL(10 * time.Second), redlock.WithRetry(redlock.LinearBackoff(5 * time.Second))}
	a, err := c.locker(t, opts...).Campaign(t.Context(), "e")
	if err != nil {
		t.Fatal(err)
	}
	b := c.locker(t, opts...)
	won := make(chan time.Time, 1)
	var next *redlock.Leadership
	go func() {
		var err error
		next, err = b.Campaign(t.Context(), "e")
		if err != nil {
			t.Error(err)
		}
		won <- time.Now()
	}()
	c.subscribed(t, "e", 1)
	start := time.Now()
	if err := a.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	at := <-won
	if next == nil {
		return
	}
	d := at.Sub(start)
	t.Logf("handed over in %v", d)
	// Its retry timer (5s) would take at least 2.5s; a second is room for
	// a loaded machine.
	if d > time.Second {
		t.Errorf("the next leader took %v after Resign began", d)
	}
	if next.Term() <= a.Term() {
		t.Errorf("term %d after %d", next.Term(), a.Term())
	}
	if err := next.Resign(t.Context()); err != nil {
		t.Error(err)
	}
	if err := a.Resign(t.Context()); !errors.Is(err, redlock.ErrReleased) {
		t.Errorf("second Resign: %v, want ErrReleased", err)
	}
}

// With the restart guard, terms keep growing while nodes restart without
// persistence (losing their fencing counters) between leaders.
func TestTermsGrowAcrossNodeRestartsWithGuard(t *testing.T) {
	c := newCluster(t, 3)
	opts := []redlock.Option{
		redlock.WithRestartGuard(1500 * time.Millisecond),
		redlock.WithTTL(time.Second),
		redlock.WithNodeTimeout(200 * time.Millisecond),
		redlock.WithRetry(redlock.LinearBackoff(20 * time.Millisecond)),
	}
	lockers := []*redlock.Locker{c.locker(t, opts...), c.locker(t, opts...)}
	if err := lockers[0].Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 6 {
		ld, err := lockers[i%2].Campaign(redistest.BoundedCtx(t), "e")
		if err != nil {
			t.Fatal(err)
		}
		if ld.Term() <= last {
			t.Fatalf("leader %d has term %d after %d", i, ld.Term(), last)
		}
		last = ld.Term()
		if err := ld.Resign(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The node forgets everything: its lock keys, its counters, its
		// marker. It abstains for the guard's time when next asked.
		if err := c.servers[i%3].Restart(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLeaderAndObserve(t *testing.T) {
	defer redlock.SetObservePoll(time.Hour)()
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithTTL(10*time.Second))
	info, err := l.Leader(t.Context(), "e")
	if err != nil || info.Leading {
		t.Fatalf("Leader before any campaign: %+v, %v", info, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	changes, err := l.Observe(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) redlock.LeaderInfo {
		t.Helper()
		select {
		case info := <-changes:
			return info
		case <-time.After(2 * time.Second):
			// The poll is an hour: only a notification wakes Observe.
			t.Fatalf("Observe did not report %s", what)
		}
		return redlock.LeaderInfo{}
	}
	if got := next("the first state"); got.Leading {
		t.Fatalf("first state %+v, want nobody leading", got)
	}
	for i := range 3 {
		ld, err := c.locker(t, redlock.WithTTL(10*time.Second)).Campaign(t.Context(), "e", redlock.WithMetadata(fmt.Sprint("node ", i)))
		if err != nil {
			t.Fatal(err)
		}
		got := next("a new leader")
		if !got.Leading || got.Term != ld.Term() || got.Metadata != fmt.Sprint("node ", i) || got.Name != "e" {
			t.Errorf("Observe: %+v, want leader %q with term %d", got, fmt.Sprint("node ", i), ld.Term())
		}
		info, err := l.Leader(t.Context(), "e")
		if err != nil || info.Term != ld.Term() || info.Metadata != ld.Metadata() || info.TTL <= 9*time.Second || info.TTL > 10*time.Second {
			t.Errorf("Leader: %+v, %v; want term %d, metadata %q, TTL near 10s", info, err, ld.Term(), ld.Metadata())
		}
		if err := ld.Resign(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := next("the resignation"); got.Leading {
			t.Errorf("after Resign: %+v, want nobody leading", got)
		}
	}
	cancel()
	for range changes {
	}
}

// An Observe that no notification reaches still sees a dead leader's
// expiry and its successor (who took over without announcing it, as a plain
// Obtain does), by polling.
func TestObservePolls(t *testing.T) {
	defer redlock.SetObservePoll(50 * time.Millisecond)()
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithPollingOnly())
	// Its fence written back into its hold, as a Campaign's is: Observe
	// reports a leader only with its term, and a fresh key's first fence
	// needs no write-back otherwise.
	lock := mustObtain(t, c.locker(t), "e", redlock.WithFencing(), redlock.WithMetadata("plain"), redlock.ConfirmFence)
	changes, err := l.Observe(t.Context(), "e")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-changes; !got.Leading || got.Term != lock.Fence() || got.Metadata != "plain" {
		t.Errorf("first state %+v, want the plain lock's holder", got)
	}
	// Deleted behind the library's back: nobody announces it.
	for _, cl := range c.clients {
		if err := cl.Del(t.Context(), "e").Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case got := <-changes:
		if got.Leading {
			t.Errorf("after the keys went: %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe did not poll")
	}
}

func TestCampaignRefusesBadInput(t *testing.T) {
	c := newCluster(t, 1)
	l := c.locker(t)
	for _, tc := range []struct {
		name string
		key  string
		opts []redlock.LockOption
	}{
		{"empty name", "", nil},
		{"reserved name", "redlock:x", nil},
		{"token", "e", []redlock.LockOption{redlock.WithToken("t")}},
		{"TTL too short to keep", "e", []redlock.LockOption{redlock.WithTTL(30 * time.Millisecond), redlock.WithNodeTimeout(12 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := l.Campaign(t.Context(), tc.key, tc.opts...); !errors.Is(err, redlock.ErrInvalid) {
				t.Errorf("Campaign: %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := l.Observe(t.Context(), ""); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Observe of an empty name: %v", err)
	}
	if _, err := l.Leader(t.Context(), "redlock:x"); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Leader of a reserved name: %v", err)
	}
}
