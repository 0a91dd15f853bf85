// Package chaos runs lock clients against a cluster while a nemesis injects
// faults, and hands the record to the checker.
//
// A run is a Scenario: which faults, on a cluster with or without
// persistence. Clients (each its own Locker with its own connections through
// the node proxies) contend on a handful of keys; for every lock they record
// when they believed they held it. The nemesis waits until the clients have
// shown a baseline, then injects faults one at a time, each on a minority of
// the nodes unless the fault says otherwise, with calm gaps between them.
// Everything random derives from the run's seed, so a run replays the same
// schedule of faults and client choices (not the same interleaving: that is
// the machine's).
package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/redlock"
)

// Workload is a set of concurrent lock clients: goroutines of this process
// and, with Config.Processes, client processes.
type Workload struct {
	addrs []string // the nodes, as clients reach them (the proxies)
	cfg   *Config
	keys  []string
	rec   recorder
	// write writes to the fenced resource; nil without fencing.
	write func(client int, key, token string, fence uint64)
	// fx is the effects store at storeAddr; nil when Config.Effects is
	// off.
	fx        checker.Effector
	storeAddr string
	seed      [2]uint64
	// stalls[i] carries client pause requests to in-process client i.
	stalls []chan stall
	// procs are the client processes, numbered after the in-process
	// clients.
	procs []*clientProcess
	// paths are the clients' own paths to the nodes, for the faults on
	// them; nil when the scenario has none, and in a client process,
	// whose addrs are its paths already.
	paths *paths
}

// recorder takes what the clients did: a History in this process, the
// pipe to the parent in a client process.
type recorder interface {
	AddHold(checker.Hold)
	AddFailure(op string, err error, at time.Time)
	AddAnomaly(checker.Anomaly)
}

// stall asks a client to pause for d during its next hold, and to report
// when it did.
type stall struct {
	d    time.Duration
	done chan [2]time.Time
}

func newWorkload(c Quorum, cfg *Config, h *checker.History, res *checker.Resource, seed [2]uint64) *Workload {
	w := &Workload{addrs: c.Addrs(), cfg: cfg, keys: keys(cfg.Keys), rec: h, seed: seed, stalls: make([]chan stall, cfg.Clients)}
	if res != nil {
		w.write = func(client int, key, token string, fence uint64) { res.Write(client, key, token, fence) }
	}
	for i := range w.stalls {
		w.stalls[i] = make(chan stall, 1)
	}
	return w
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("chaos:%d", i)
	}
	return out
}

// Run runs the clients until ctx ends, then waits for each to release what
// it holds and close its Locker and connections. Client processes record
// into h and write to res (nil without fencing).
func (w *Workload) Run(ctx context.Context, h *checker.History, res *checker.Resource) error {
	errs := make([]error, w.cfg.Clients+len(w.procs))
	var wg sync.WaitGroup
	for i := range w.cfg.Clients {
		wg.Go(func() { errs[i] = w.client(ctx, i) })
	}
	for k, p := range w.procs {
		wg.Go(func() { errs[w.cfg.Clients+k] = p.run(ctx, h, res) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nextStall returns the pause asked of client i, if any (done is nil if
// none): a client takes it during its next hold.
func (w *Workload) nextStall(i int) (st stall) {
	if i < len(w.stalls) {
		select {
		case st = <-w.stalls[i]:
		default:
		}
	}
	return st
}

// pause pauses for s.d, even if the run ends meanwhile (a paused process
// does not notice), and reports when it began and ended.
func (s stall) pause() {
	began := time.Now()
	time.Sleep(s.d)
	s.done <- [2]time.Time{began, time.Now()}
}

// Stall makes client i pause for d, the way a long garbage-collection pause
// or a descheduled VM stops a process, during its next hold, and returns
// when the pause began and ended.
func (w *Workload) Stall(ctx context.Context, i int, d time.Duration) (began, ended time.Time, err error) {
	s := stall{d: d, done: make(chan [2]time.Time, 1)}
	select {
	case w.stalls[i] <- s:
	case <-ctx.Done():
		return began, ended, ctx.Err()
	}
	select {
	case t := <-s.done:
		return t[0], t[1], nil
	case <-ctx.Done():
		// The client still takes the request and pauses; the fault is
		// not recorded.
		return began, ended, ctx.Err()
	}
}

// clientAddrs returns the node addresses of client i: its own paths, or
// the addresses every client shares.
func (w *Workload) clientAddrs(i int) []string {
	if w.paths != nil {
		return w.paths.addrs(i)
	}
	return w.addrs
}

func (w *Workload) client(ctx context.Context, i int) error {
	return withLocker(w.clientAddrs(i), w.cfg, func(locker *redlock.Locker) error {
		// Several goroutines share the Locker, as in a server, so that
		// locks also pass between them (handoffs, the local waiter line).
		var wg sync.WaitGroup
		for g := range max(w.cfg.Goroutines, 1) {
			rng := rand.New(rand.NewPCG(w.seed[0], w.seed[1]+uint64(i)+1+uint64(g)<<32))
			wg.Go(func() { w.loop(ctx, i, rng, locker) })
		}
		wg.Wait()
		return nil
	})
}

// withLocker opens one node per address (openNode) and a Locker over them
// with cfg's options, runs f with the Locker, then closes the Locker and
// the nodes' clients, and returns every error.
func withLocker(addrs []string, cfg *Config, f func(*redlock.Locker) error) (err error) {
	nodes := make([]redlock.Node, len(addrs))
	for j, addr := range addrs {
		node, closeNode := openNode(addr)
		defer func() { err = errors.Join(err, closeNode()) }()
		nodes[j] = node
	}
	// The nemesis takes nodes out on purpose: the Locker's warnings about
	// them would flood the run's output, whose report says what happened.
	opts := append(cfg.lockOptions(), redlock.WithLogger(slog.New(slog.DiscardHandler)))
	locker, err := redlock.NewNodes(nodes, opts...)
	if err != nil {
		return err
	}
	// Close waits for the clean-up of late replies, so it runs before the
	// connections close.
	defer func() { err = errors.Join(err, locker.Close()) }()
	return f(locker)
}

// loop is one goroutine of client i: it obtains random keys, one at a time,
// and holds them, until ctx ends. With Config.Behaviours it uses the lock in
// the ways real programs do (behaviour.go).
func (w *Workload) loop(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker) {
	if w.cfg.Workload != "" {
		w.loopWorkload(ctx, i, rng, locker)
		return
	}
	for ctx.Err() == nil {
		key := w.keys[rng.IntN(len(w.keys))]
		if w.cfg.Behaviours {
			w.behave(ctx, i, rng, locker, key)
			continue
		}
		lock, obtained, ok := w.obtain(ctx, i, rng, locker, key)
		if ok {
			w.hold(ctx, i, rng, lock, obtained, 0)
		}
	}
}

// obtain obtains key for client i, once or waiting, records a failure,
// and reports when Obtain returned.
func (w *Workload) obtain(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, key string, opts ...redlock.LockOption) (*redlock.Lock, time.Time, bool) {
	var (
		lock *redlock.Lock
		err  error
	)
	if i%2 == 0 {
		// Half the clients make one attempt at a time and count
		// each failure.
		lock, err = locker.TryObtain(ctx, key, opts...)
	} else {
		// The other half wait in Obtain, woken by releases, for up
		// to two TTLs.
		octx, cancel := context.WithTimeout(ctx, 2*w.cfg.TTL)
		lock, err = locker.Obtain(octx, key, opts...)
		cancel()
	}
	obtained := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			w.rec.AddFailure("obtain", err, obtained)
			// A short jittered pause, so that the clients do not move
			// in lockstep; contention is the point, so it stays short.
			sleep(ctx, time.Millisecond+randDuration(rng, 10*time.Millisecond))
		}
		return nil, obtained, false
	}
	return lock, obtained, true
}

// hold uses a lock the way a client would and records what it believed.
// A cooldown above 0 releases with ReleaseAfter: nobody may obtain the key
// for that long.
func (w *Workload) hold(ctx context.Context, i int, rng *rand.Rand, lock *redlock.Lock, obtained time.Time, cooldown time.Duration) {
	w.holdAs(ctx, i, rng, lock, lock.Token(), obtained, cooldown)
}

// holdAs is hold with label as the lock's token in the records: a client
// that obtains a key again and again with one token labels each
// acquisition apart, so that the checkers see successive holders.
func (w *Workload) holdAs(ctx context.Context, i int, rng *rand.Rand, lock *redlock.Lock, label string, obtained time.Time, cooldown time.Duration) {
	key := lock.Key()
	seg := checker.Hold{Client: i, Key: key, Token: label, Fence: lock.Fence(), Start: obtained, End: lock.Until()}
	write := func() {
		if w.write != nil {
			w.write(i, key, label, lock.Fence())
		}
	}
	// extend extends the lock; a success after the deadline had passed
	// starts a new belief interval.
	extend := func() {
		err := lock.Extend(ctx, w.cfg.TTL)
		now := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				w.rec.AddFailure("extend", err, now)
			}
			return
		}
		if now.After(seg.End) {
			w.rec.AddHold(seg)
			seg.Segment++
			seg.Start = now
		}
		seg.End = lock.Until()
	}
	if seg.Empty() {
		// Obtain returned after the deadline: a careful client does not
		// use such a lock at all.
		w.rec.AddHold(seg)
		w.release(ctx, lock)
		return
	}
	write()

	d := randDuration(rng, w.cfg.MaxHold) + time.Millisecond
	if rng.Float64() < w.cfg.LongHolds {
		// A long hold: a node that forgets the lock meanwhile can grant
		// it again while it is held, which short holds rarely show.
		d = between(rng, w.cfg.TTL/4, w.cfg.TTL/2)
	}
	st := w.nextStall(i)
	switch {
	case st.done != nil:
		// The client pause: it holds the lock, stops for longer than the
		// TTL, and carries on as a careless client would, writing
		// without checking Valid. Its belief ended at Until; the fenced
		// resource must turn the write away once a newer holder wrote.
		// The pause falls between the read and the write of its
		// read-modify-write, the classic lost update that only fencing
		// prevents.
		w.effect(ctx, i, lock, true, func() bool {
			st.pause()
			return true
		})
		write()
		extend()
	case rng.Float64() < w.cfg.ExtendShare:
		w.carefulEffect(ctx, i, lock, func() {
			sleep(ctx, d/2)
			extend()
			sleep(ctx, d/2)
		})
		if lock.Valid() {
			write()
		}
	default:
		w.carefulEffect(ctx, i, lock, func() { sleep(ctx, d) })
		if lock.Valid() {
			write()
		}
	}
	if now := time.Now(); now.Before(seg.End) {
		seg.End = now
	}
	w.rec.AddHold(seg)
	if cooldown > 0 {
		w.releaseAfter(ctx, lock, seg, cooldown)
		return
	}
	w.release(ctx, lock)
}

// carefulEffect is a careful holder's read-modify-write of the protected
// counter around its work: it reads, works, and writes only if its lock
// still has room for the write to land. Unless Config.CheckedEffects, its
// operations are not fence-checked, so mutual exclusion alone must keep
// its updates. With no room at the start it only works.
func (w *Workload) carefulEffect(ctx context.Context, i int, lock *redlock.Lock, work func()) {
	// A careful program leaves itself room for a write to land before its
	// deadline.
	room := func() bool { return time.Until(lock.Until()) > w.cfg.TTL/4 }
	if w.fx == nil || !room() {
		work()
		return
	}
	w.effect(ctx, i, lock, w.cfg.CheckedEffects, func() bool {
		work()
		return room()
	})
}

// effect reads the key's protected counter, runs between, and, if it
// returns true, writes the counter plus one. checked makes the store reject
// the operations if their fence is stale.
func (w *Workload) effect(ctx context.Context, i int, lock *redlock.Lock, checked bool, between func() bool) {
	if w.fx == nil {
		return
	}
	// The operations go on when the run ends, as a real write would.
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	read := time.Now()
	v, err := w.fx.Read(octx, lock.Key(), lock.Fence(), checked)
	if err == nil && between() {
		err = w.fx.Write(octx, lock.Key(), lock.Fence(), checked, v, lock.Until(), writer(i, lock.Token(), lock.Fence(), checked, read, lock.Until()))
	}
	if err != nil && !errors.Is(err, checker.ErrStale) {
		w.rec.AddFailure("effect", err, time.Now())
	}
}

// writer describes a read-modify-write for the effects store's log of lost
// updates: who, with which fence, whether checked, when it read, and when
// it decided to write against its lock's deadline (all wall clock, as the
// store's log lines of different processes compare).
func writer(i int, token string, fence uint64, checked bool, read, until time.Time) string {
	const layout = "15:04:05.000000"
	now := time.Now()
	return fmt.Sprintf("client %d token %s fence %d (checked %t) read at %s, wrote at %s, deadline %s (%+.1fms)",
		i, token, fence, checked, read.Format(layout), now.Format(layout), until.Format(layout),
		float64(until.Sub(now).Microseconds())/1000)
}

func (w *Workload) release(ctx context.Context, lock *redlock.Lock) {
	// Release even when the run is over, so nothing is left behind.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := lock.Release(rctx); err != nil {
		w.rec.AddFailure("release", err, time.Now())
	}
}

// sleep waits for d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// randDuration returns a duration in [0, d).
func randDuration(rng *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(d)))
}

// between returns a duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + randDuration(rng, hi-lo)
}
