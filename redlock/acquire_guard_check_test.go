package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// guardedServer is one server that a guarded Locker has bootstrapped and
// loaded the guard's library on, and one guarded acquisition of a key
// there (the library's function, called directly), for tests of the
// function's check.
func guardedServer(t *testing.T) (*redis.Client, func(redis.Cmdable, string) *redis.Cmd) {
	t.Helper()
	c := newCluster(t, 1)
	l := c.bootstrapped(t)
	// The Locker's connection loads the library; its check stamps nothing
	// more (Bootstrap did), and lets the node vote.
	lock := mustObtain(t, l, "loaded")
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c.clients[0], func(p redis.Cmdable, key string) *redis.Cmd {
		keys := []string{key, "redlock:fence:" + key, scripts.GuardMarker, scripts.GuardQuarantine}
		return p.FCall(t.Context(), scripts.Acquire.Guarded(true).Fn, keys, "t\x001\x00", 10000, "t\x00", "0", 10000, 60000, 0)
	}
}

// The guard's function spares the checks that follow a passed one for a
// millisecond of the server's clock (library.lua's passed key): inside one
// transaction (MULTI/EXEC, no time passes for the server's keys), a
// hundred guarded acquisitions cost the server a TIME or two, not a
// hundred; and a FLUSHALL among them, which takes the key away with the
// marker, is seen by the very next acquisition.
func TestGuardPassedCheckSparesTheNext(t *testing.T) {
	const n = 100
	cl, acquire := guardedServer(t)

	if err := cl.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	tx := cl.TxPipeline()
	cmds := make([]*redis.Cmd, n)
	for i := range cmds {
		cmds[i] = acquire(tx, "k"+strings.Repeat("x", i))
	}
	if _, err := tx.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if v, err := cmd.Int64(); err != nil || v != 0 {
			t.Fatalf("acquisition %d of %d in one transaction: %v %v, want granted (0)", i, n, v, err)
		}
	}
	times, _, _ := cmdStat(t, cl, "time")
	infos, _, _ := cmdStat(t, cl, "info")
	if times > n/2 {
		t.Errorf("%d guarded acquisitions in one transaction called TIME %v times, want a few (the first check's)", n, times)
	}
	t.Logf("%d guarded acquisitions in one transaction: %v TIME, %v INFO", n, times, infos)

	// Checks far apart (a quiet node) write no passed key, which would
	// expire unread: each acquisition's one SET is its lock key's.
	if err := cl.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		time.Sleep(3 * time.Millisecond) // time must pass here: two ticks of the server's clock
		if v, err := acquire(cl, "quiet"+strings.Repeat("x", i)).Int64(); err != nil || v != 0 {
			t.Fatalf("quiet acquisition %d: %v %v, want granted (0)", i, v, err)
		}
	}
	if sets, _, _ := cmdStat(t, cl, "set"); sets != 3 {
		t.Errorf("3 guarded acquisitions 3 ms apart made %v SETs, want 3 (no passed key)", sets)
	}

	// Two checks close together leave the passed key; a FLUSHALL takes it
	// away, and the next acquisition checks in full.
	tx = cl.TxPipeline()
	before := []*redis.Cmd{acquire(tx, "before"), acquire(tx, "before2")}
	passedKey := tx.Exists(t.Context(), scripts.GuardMarker+":passed")
	tx.FlushAll(t.Context())
	after := acquire(tx, "after")
	_, err := tx.Exec(t.Context())
	for i, cmd := range before {
		if v, err := cmd.Int64(); err != nil || v != 0 {
			t.Fatalf("acquisition %d before FLUSHALL: %v %v, want granted (0)", i, v, err)
		}
	}
	if n := passedKey.Val(); n != 1 {
		t.Fatalf("no passed key after two checks in one transaction (%v, %v): the FLUSHALL below would test nothing", n, passedKey.Err())
	}
	if err == nil || !strings.HasPrefix(after.Err().Error(), "ABSTAIN node lost its memory") {
		t.Fatalf("the acquisition right after FLUSHALL (same transaction): %v (%v), want ABSTAIN node lost its memory", after.Err(), err)
	}
}

// A quarantine whose key goes before its time (evicted, as a key with a
// TTL is under a volatile-* policy switched on at run time) does not let
// the node vote on an eviction count read before the eviction: the check
// reads the count again at once. Inside one transaction, so that no
// millisecond passes between the calls: the quarantine's key deleted and
// the count moved (CONFIG RESETSTAT), as an eviction of that key leaves
// them, keep the node out; the key deleted alone (Bootstrap's
// ClearQuarantine) lets it vote at once, as before.
func TestGuardQuarantineEvictedKeepsNodeOut(t *testing.T) {
	cl, acquire := guardedServer(t)
	// Some keys evicted: the count the next check reads is not the
	// marker's.
	configSet(t, cl, "maxmemory-policy", "volatile-lru", "maxmemory", "4mb")
	if err := cl.Set(t.Context(), "victim", "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	evict(t, cl, "victim")
	configSet(t, cl, "maxmemory", "0", "maxmemory-policy", "noeviction")

	const abstain = "ABSTAIN node lost its memory"
	for _, step := range []struct {
		name      string
		resetStat bool
		want      string // "" for granted
	}{
		{"the quarantine's key evicted", true, abstain},
		{"the quarantine's key deleted on purpose", false, ""},
	} {
		tx := cl.TxPipeline()
		first := acquire(tx, "first")
		tx.Del(t.Context(), "redlock:guard:quarantine")
		if step.resetStat {
			tx.ConfigResetStat(t.Context())
		}
		second := acquire(tx, "second")
		_, _ = tx.Exec(t.Context()) // each command's error is read below
		if err := first.Err(); err == nil || !strings.HasPrefix(err.Error(), abstain) {
			t.Fatalf("%s: the acquisition before: %v, want %s", step.name, err, abstain)
		}
		err := second.Err()
		switch {
		case step.want == "" && err != nil:
			t.Fatalf("%s: the acquisition after: %v, want granted", step.name, err)
		case step.want != "" && (err == nil || !strings.HasPrefix(err.Error(), step.want)):
			t.Fatalf("%s: the acquisition after: %v (%v), want %s", step.name, second.Val(), err, step.want)
		}
		if err := cl.Del(t.Context(), "first", "second").Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A guarded acquisition that is not fenced goes in the function's lean
// form (the lock key; value, TTL, prefix and maximum TTL): re-entry by
// token, refusal of another token and release behave as in the full form.
func TestGuardLeanAcquisitionKeepsHolds(t *testing.T) {
	c := newCluster(t, 3)
	l := c.bootstrapped(t)
	// Every command goes to the slow log, with its arguments: which
	// function each acquisition called.
	for _, cl := range c.clients {
		configSet(t, cl, "slowlog-log-slower-than", "0", "slowlog-max-len", "1024")
		if err := cl.SlowLogReset(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	outer := mustObtain(t, l, "k")
	inner := mustObtain(t, l, "k", redlock.WithToken(outer.Token()))
	settledHolds(t, l, "k", 2)
	if _, err := l.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("another token while k is held: %v, want ErrNotObtained", err)
	}
	if err := inner.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, cl := range c.clients {
		if n, err := cl.Exists(t.Context(), "k").Result(); err != nil || n != 1 {
			t.Fatalf("node %d after the inner release: %d keys (%v), want the outer hold kept", i, n, err)
		}
	}
	if err := outer.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.assertNone(t, "k")
	// Each of the three acquisitions was decided by at least two of the
	// three nodes' replies; the third node's call may still be on its way
	// (the quorum does not wait for it), so count over all the nodes.
	var calls float64
	for _, cl := range c.clients {
		n, _, _ := cmdStat(t, cl, "fcall")
		calls += n
	}
	if calls < 6 {
		t.Fatalf("%v FCALLs over the nodes for 3 guarded acquisitions, want at least 6 (two decided each) through the library", calls)
	}
	lean := 0
	for _, cl := range c.clients {
		entries, err := cl.SlowLogGet(t.Context(), -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if len(e.Args) > 1 && strings.EqualFold(e.Args[0], "fcall") && strings.HasSuffix(e.Args[1], "_acquire_lean") {
				lean++
			}
		}
	}
	if lean < 6 {
		t.Fatalf("%d calls of the lean function over the nodes for 3 guarded acquisitions, want at least 6", lean)
	}
}

// A quarantine lasts the maximum TTL and two fence windows (200 ms) more,
// wherever it starts: the guard's function, the acquire script (servers
// without functions) and Bootstrap. A fenced grant after it may restart a
// counter that went back from a start up to two windows old (acquire.lua),
// which must still lie above every fence of the node's lost grants, as far
// as the maximum TTL ahead of its clock.
func TestRestartGuardQuarantineCoversTwoFenceWindows(t *testing.T) {
	const maxTTL = 10000 // ms: guardOpts' maximum TTL, and guardedServer's
	quarantine := func(t *testing.T, cl *redis.Client, path string) {
		t.Helper()
		d, err := cl.PTTL(t.Context(), scripts.GuardQuarantine).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Read a moment after it began: more than one window above the
		// maximum TTL, at most two.
		t.Logf("%s: the quarantine lasts %v more", path, d)
		if ms := d.Milliseconds(); ms <= maxTTL+100 || ms > maxTTL+200 {
			t.Errorf("%s: the quarantine lasts %v, want more than %dms and at most %dms", path, d, maxTTL+100, maxTTL+200)
		}
	}
	cl, acquire := guardedServer(t)
	keys := []string{"k", "redlock:fence:k", scripts.GuardMarker, scripts.GuardQuarantine}
	for _, path := range []struct {
		name string
		run  func() error
	}{
		{"the function", func() error { return acquire(cl, "k").Err() }},
		{"the script", func() error {
			return scripts.Acquire.Run(t.Context(), cl, keys, "t\x001\x00", 10000, "t\x00", "0", maxTTL, 60000, 0).Err()
		}},
	} {
		if err := cl.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := path.run(); err == nil || !strings.HasPrefix(err.Error(), "ABSTAIN node lost its memory") {
			t.Fatalf("%s on a flushed node: %v, want ABSTAIN node lost its memory", path.name, err)
		}
		quarantine(t, cl, path.name)
	}
	// Bootstrap finds a marker with another stamp (a loss) and starts the
	// quarantine itself.
	if err := cl.FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Set(t.Context(), scripts.GuardMarker, "0000 0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, []*redis.Client{cl}, guardOpts...)
	if err := l.Bootstrap(t.Context()); err == nil {
		t.Fatal("Bootstrap over a marker with another stamp: no error, want the node reported as abstaining")
	}
	quarantine(t, cl, "Bootstrap")
}
