package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// The restart guard as a Redis Function (library.lua): the run_id it keeps
// between calls is the server's, so a proxy that keeps the client's
// connection while another server process takes over cannot hide the
// change; a server that lost the library still guards, through the script.

// cmdStat returns the calls, failed or rejected calls and total µs of
// command name on the server of cl, from INFO commandstats.
func cmdStat(t *testing.T, cl *redis.Client, name string) (calls, failed, usec float64) {
	t.Helper()
	stats, err := cl.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(stats) {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+name+":")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(strings.TrimSpace(rest), ",") {
			k, v, _ := strings.Cut(f, "=")
			var x float64
			_, _ = fmt.Sscan(v, &x)
			switch k {
			case "calls":
				calls = x
			case "failed_calls", "rejected_calls":
				failed += x
			case "usec":
				usec = x
			}
		}
	}
	return calls, failed, usec
}

// fromSnapshot saves s's data (the guard's library and marker included)
// and starts a second server from a copy of that snapshot: the same data
// under another run_id, as s restarted from its snapshot would be.
func fromSnapshot(t *testing.T, s *redistest.Server) *redistest.Server {
	t.Helper()
	cl := s.NewClient()
	defer cl.Close()
	if err := cl.Save(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	dir, err := cl.ConfigGet(t.Context(), "dir").Result()
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := os.ReadFile(filepath.Join(dir["dir"], "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	copyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(copyDir, "dump.rdb"), rdb, 0o600); err != nil {
		t.Fatal(err)
	}
	// Start, not StartT, which gives each server a fresh directory.
	copied, err := redistest.Start(redistest.Options{Dir: copyDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = copied.Close() })
	return copied
}

// libraries counts the function libraries on s.
func libraries(t *testing.T, s *redistest.Server) int {
	t.Helper()
	cl := s.NewClient()
	defer cl.Close()
	libs, err := cl.Do(t.Context(), "function", "list").Slice()
	if err != nil {
		t.Fatal(err)
	}
	return len(libs)
}

// proxied is a cluster whose first two nodes are reached through
// forwarders, and the clients of a Locker over it.
func proxied(t *testing.T) (*cluster, []*redistest.Forwarder, []*redis.Client) {
	t.Helper()
	c := newCluster(t, 3)
	var fwds []*redistest.Forwarder
	var clients []*redis.Client
	for i, s := range c.servers {
		if i == 2 {
			clients = append(clients, c.clients[i])
			break
		}
		f := redistest.ForwardT(t, s.Addr)
		fwds = append(fwds, f)
		clients = append(clients, f.ClientT(t))
	}
	return c, fwds, clients
}

// guardedBehindProxy returns two guarded Lockers, A bootstrapped, over a
// proxied cluster, its forwarders, and servers started from snapshots of
// the first two nodes taken now, each with the guard's library.
func guardedBehindProxy(t *testing.T) (a, b *redlock.Locker, fwds []*redistest.Forwarder, copies []*redistest.Server) {
	t.Helper()
	c, fwds, clients := proxied(t)
	a, b = newLocker(t, clients, guardOpts...), newLocker(t, clients, guardOpts...)
	if err := a.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, s := range c.servers[:2] {
		copies = append(copies, fromSnapshot(t, s))
		if libs := libraries(t, copies[i]); libs != 1 {
			t.Fatalf("node %d's snapshot has %d function libraries, want the guard's", i, libs)
		}
	}
	return a, b, fwds, copies
}

// A proxy keeps B's connections while the servers of two nodes behind it
// are replaced by processes started from their snapshots, taken before A's
// lock: the library and the marker came back with the data, the lock did
// not. The library's locals are the new process's, so it reads the new
// run_id and abstains.
func TestRestartGuardFunctionBehindProxy(t *testing.T) {
	a, b, fwds, copies := guardedBehindProxy(t)
	lock := mustObtain(t, a, "k")
	// B's connections for "k" open now, and see the lock: contention.
	if _, err := b.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("B while A holds the lock: %v, want ErrNotObtained", err)
	}
	for i, f := range fwds {
		f.MoveTo(copies[i].Addr)
	}
	_, err := b.TryObtain(t.Context(), "k")
	secondClientKeptOut(t, lock, err, "a proxy moved B's open connections to servers restarted from a snapshot older than the lock")
	everyFCALLAbstained(t, copies)
}

// everyFCALLAbstained fails the test unless the acquisitions on each of
// the servers ran as FCALL and every one was answered ABSTAIN.
func everyFCALLAbstained(t *testing.T, servers []*redistest.Server) {
	t.Helper()
	for i, s := range servers {
		cl := s.NewClient()
		// The undo of B's attempt is a script, which the new server
		// lacks (SCRIPT LOAD is not persisted): an EVAL; the acquisition
		// ran as FCALL, answered ABSTAIN in the function, never sent
		// again. The only ERR replies are FUNCTION LOAD's "already
		// exists", for connections opened since (none was "Function not
		// found").
		calls, failed, _ := cmdStat(t, cl, "fcall")
		_, loadErrs, _ := cmdStat(t, cl, "function|load")
		errs, _ := cl.Info(t.Context(), "errorstats").Result()
		_ = cl.Close()
		abstained := strings.Contains(errs, "errorstat_ABSTAIN:count="+fmt.Sprint(calls)+"\r\n")
		otherErrs := loadErrs == 0 && strings.Contains(errs, "errorstat_ERR:") ||
			loadErrs > 0 && !strings.Contains(errs, "errorstat_ERR:count="+fmt.Sprint(loadErrs)+"\r\n")
		if calls == 0 || calls != failed || !abstained || otherErrs {
			t.Errorf("node %d's new server: %v FCALLs, %v failed, %v FUNCTION LOADs refused, errors %q: want every FCALL answered ABSTAIN",
				i, calls, failed, loadErrs, errs)
		}
	}
}

// A proxy keeps B's connections while the servers of two nodes behind it
// are replaced by servers without persistence: the library is gone with the
// data. The calls answered "Function not found" go again as scripts, which
// abstain, and the library is loaded again; the nodes vote once the maximum
// TTL has passed since they noticed, not before.
func TestRestartGuardFunctionLostBehindProxy(t *testing.T) {
	const maxTTL = 2 * time.Second
	opts := []redlock.Option{redlock.WithRestartGuard(maxTTL), redlock.WithTTL(maxTTL), redlock.WithNodeTimeout(time.Second)}
	_, fwds, clients := proxied(t)
	a, b := newLocker(t, clients, opts...), newLocker(t, clients, opts...)
	if err := a.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	empty := redistest.StartT(t, 2, redistest.Options{})
	lock := mustObtain(t, a, "k")
	if _, err := b.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("B while A holds the lock: %v, want ErrNotObtained", err)
	}
	for i, f := range fwds {
		f.MoveTo(empty[i].Addr)
	}
	moved := time.Now()
	_, err := b.TryObtain(t.Context(), "k")
	secondClientKeptOut(t, lock, err, "a proxy moved B's open connections to servers that lost everything, functions included")
	for i, s := range empty {
		cl := s.NewClient()
		_, failed, _ := cmdStat(t, cl, "fcall")
		evals, _, _ := cmdStat(t, cl, "eval")
		errs, _ := cl.Info(t.Context(), "errorstats").Result()
		_ = cl.Close()
		// Usually the function is missing and the script goes instead; but
		// a connection opened to the new server meanwhile (a reconnect) may
		// have loaded the library first, and the function then abstains
		// itself. Either way every FCALL failed.
		if failed == 0 || evals == 0 && !strings.Contains(errs, "errorstat_ABSTAIN") {
			t.Errorf("node %d: %v failed FCALLs, %v EVALs, errors %q: want the function missing and the script sent, or the function abstaining", i, failed, evals, errs)
		}
		if libs := libraries(t, s); libs != 1 {
			t.Errorf("node %d has %d function libraries, want the guard's loaded again", i, libs)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*maxTTL)
	defer cancel()
	got, err := b.Obtain(ctx, "k")
	if err != nil {
		t.Fatalf("B after the maximum TTL: %v", err)
	}
	if since := time.Since(moved); since < maxTTL {
		t.Errorf("B got the lock %v after the nodes lost their memory, before the maximum TTL %v", since, maxTTL)
	}
	if err := got.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A server whose ACL refuses FUNCTION LOAD and FCALL, or FCALL only, gets
// the guarded acquisitions as scripts, which guard as before.
func TestRestartGuardWithoutFunctions(t *testing.T) {
	for name, refused := range map[string][]string{"load": {"+function|load ", "+fcall "}, "fcall": {"+fcall "}} {
		t.Run("refused="+name, func(t *testing.T) {
			rule := redlock.ACLRule
			for _, r := range refused {
				rule = strings.Replace(rule, r, "", 1)
			}
			guardWithoutFunctions(t, redistest.StartACLT(t, 3, redistest.Options{}, rule), len(refused) == 1)
		})
	}
}

// guardWithoutFunctions is TestRestartGuardWithoutFunctions on servers
// whose ACL refuses the functions; loads says whether it allows FUNCTION
// LOAD (then the first FCALL is refused, and sent again as the script).
func guardWithoutFunctions(t *testing.T, servers []*redistest.Server, loads bool) {
	t.Helper()
	clients := redistest.ClientsAs(t, servers, "locker", "pw", &redis.Options{})
	a, b := newLocker(t, clients, guardOpts...), newLocker(t, clients, guardOpts...)
	if err := a.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	lock := mustObtain(t, a, "k")
	for _, s := range servers[:2] {
		admin := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "admin", Password: "admin"})
		err := admin.FlushAll(t.Context()).Err()
		_ = admin.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.TryObtain(t.Context(), "k")
	secondClientKeptOut(t, lock, err, "two of three nodes without functions were flushed")
	admin := redis.NewClient(&redis.Options{Addr: servers[0].Addr, Username: "admin", Password: "admin"})
	defer admin.Close()
	calls, failed, _ := cmdStat(t, admin, "fcall")
	switch {
	case !loads && calls+failed != 0:
		t.Errorf("%v FCALLs (%v failed) on a server that refuses FUNCTION LOAD, want none", calls, failed)
	case loads && (calls != 0 || failed == 0):
		t.Errorf("%v FCALLs run and %v refused on a server that refuses FCALL, want some refused, none run", calls, failed)
	}
}

// A node switched to an evicting policy at run time (CONFIG SET) abstains
// once the function reads INFO memory again (at the first acquisition 100
// ms or more after its last reading), without having evicted a key.
func TestRestartGuardFunctionSeesPolicySwitch(t *testing.T) {
	c := newCluster(t, 3)
	a := c.bootstrapped(t)
	first := mustObtain(t, a, "k1")
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, cl := range c.clients[:2] {
		configSet(t, cl, "maxmemory-policy", "volatile-lru", "maxmemory", "1gb")
	}
	const why = "node abstains: maxmemory-policy volatile-lru may evict lock keys"
	err := redistest.Eventually(t, 5*time.Second, func() error {
		lock, err := a.TryObtain(t.Context(), "k2")
		if err == nil {
			return errors.Join(errors.New("granted"), lock.Release(t.Context()))
		}
		if !errors.Is(err, redlock.ErrNoQuorum) || strings.Count(err.Error(), why) != 2 {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("two nodes switched to volatile-lru at run time: %v, want ErrNoQuorum with %q twice", err, why)
	}
}

// The server time of one acquisition (INFO commandstats), plain, guarded
// by the script (a user refused the functions) and guarded by the
// function, on one server in one run: the function's must be far below the
// script's. The figures are in docs/benchmarks.md.
func TestGuardServerTime(t *testing.T) {
	const n = 2000
	rule := strings.NewReplacer("+function|load ", "", "+fcall ", "").Replace(redlock.ACLRule)
	server := redistest.StartACLT(t, 1, redistest.Options{}, rule)[0]
	admin := redis.NewClient(&redis.Options{Addr: server.Addr, Username: "admin", Password: "admin"})
	defer admin.Close()
	if err := redistest.SetUser(t.Context(), admin, "fn", "pw", redlock.ACLRule); err != nil {
		t.Fatal(err)
	}
	variants := []struct {
		name, user, cmd string
		opts            []redlock.Option
	}{
		{"plain", "fn", "evalsha", nil},
		{"guarded by the script", "locker", "evalsha", guardOpts},
		{"guarded by the function", "fn", "fcall", guardOpts},
	}
	perCall := make([]float64, len(variants))
	for i, v := range variants {
		if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		l := newLocker(t, redistest.ClientsAs(t, []*redistest.Server{server}, v.user, "pw", &redis.Options{}), v.opts...)
		if err := l.Bootstrap(t.Context()); err != nil {
			t.Fatal(err)
		}
		loads, refused, _ := cmdStat(t, admin, "function|load")
		before := loads + refused
		if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		// Acquisitions only (no release), each of a free key, from 8
		// goroutines: calls close together, as under load.
		began := time.Now()
		errs := make(chan error, 8)
		for w := range 8 {
			go func() {
				for j := w; j < n; j += 8 {
					if _, err := l.TryObtain(t.Context(), fmt.Sprintf("%s:%d", v.name, j)); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		took := time.Since(began)
		calls, _, usec := cmdStat(t, admin, v.cmd)
		if calls != n {
			t.Fatalf("%s: %v calls of %s for %d acquisitions", v.name, calls, v.cmd, n)
		}
		t.Logf("%-24s %v calls of %s for %d acquisitions", v.name, calls, v.cmd, n)
		perCall[i] = usec / n
		// What makes the function cheaper, by construction: it reads
		// INFO at most once a millisecond (the eviction count; the
		// policy every 100 ms), the script at every call; and a check
		// that passed spares the next millisecond's their TIME. The
		// server counts the INFO and TIME calls its scripts and
		// functions make; a few more INFO calls are the new
		// connections' set-ups and cmdStat's own.
		infos, _, _ := cmdStat(t, admin, "info")
		times, _, _ := cmdStat(t, admin, "time")
		ms := float64(took.Milliseconds()) + 1
		switch {
		case v.opts == nil && infos > 10:
			t.Errorf("%s: %v INFO calls, want none but set-ups'", v.name, infos)
		case v.cmd == "evalsha" && v.opts != nil && infos < n:
			t.Errorf("%s: %v INFO calls for %d acquisitions, want one each", v.name, infos, n)
		case v.cmd == "fcall" && infos > 2*ms+10:
			t.Errorf("%s: %v INFO calls in %v (%d acquisitions), want at most about one a millisecond", v.name, infos, took, n)
		case v.cmd == "fcall" && times > 2*ms+10:
			t.Errorf("%s: %v TIME calls in %v (%d acquisitions), want at most about one a millisecond", v.name, times, took, n)
		}
		t.Logf("%-24s %v INFO and %v TIME calls in %v", v.name, infos, times, took)
		loads, refused, _ = cmdStat(t, admin, "function|load")
		if loads += refused + before; (v.opts == nil) != (loads == 0) {
			t.Errorf("%s: FUNCTION LOAD sent %v times, want it with the guard only", v.name, loads)
		}
		t.Logf("%-24s %5.2f server-µs per acquisition (%s)", v.name, perCall[i], v.cmd)
	}
	// The server times are logged, not compared: under -race on a
	// loaded machine the calls spread out, the function then reads INFO
	// at most every call too, and the ratio is noise (docs/benchmarks.md
	// has the figures of a quiet run).
}
