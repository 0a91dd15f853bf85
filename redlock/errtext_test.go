package redlock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock"
)

// requireOneLine fails unless msg is a single line without control bytes
// that could break or forge a log line.
func requireOneLine(t *testing.T, msg string) {
	t.Helper()
	if strings.ContainsAny(msg, "\n\r\x00") {
		t.Fatalf("error text is not one clean line: %q", msg)
	}
}

// rawClient is a client to addr set up as the test helpers set theirs up,
// then changed by mod; closed at cleanup.
func rawClient(t *testing.T, addr string, mod func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, Protocol: 2, DisableIdentity: true}
	if mod != nil {
		mod(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A node that cannot be used says why, in the QuorumError's node detail and
// in its text, rather than "node timeout": a refused dial, a password that
// is missing or wrong, a host that does not resolve, a TLS handshake with a
// server that does not speak TLS (which hangs until the client's
// DialTimeout: until the server is found to answer plain commands, the
// node is said to be still connecting; then it is a TLS mismatch).
func TestErrorNamesNodeCause(t *testing.T) {
	plain := redistest.StartT(t, 1, redistest.Options{})[0]
	guarded := redistest.StartT(t, 1, redistest.Options{Args: []string{"--requirepass", "s3cret-pw"}})[0]
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		client  *redis.Client
		want    string // in the error's text
		node    string // in the node's error
		timeout bool   // the cause arrives after the round's timeout
	}{
		{"refused", rawClient(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil), "connection refused", "connection refused", false},
		{"noauth", rawClient(t, guarded.Addr, nil), "authentication required (no password given for this node)", "NOAUTH", false},
		{"wrongpass", rawClient(t, guarded.Addr, func(o *redis.Options) { o.Password = "not-the-password" }), "authentication failed (wrong user name or password)", "WRONGPASS", false},
		{"dns", rawClient(t, "no-such-host.invalid:6379", nil), "lookup no-such-host.invalid", "lookup no-such-host.invalid", false},
		{"tls", rawClient(t, plain.Addr, func(o *redis.Options) {
			o.TLSConfig, o.DialTimeout = &tls.Config{InsecureSkipVerify: true}, time.Second
		}), "TLS mismatch: the client speaks TLS", "TLS mismatch", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocker(t, []*redis.Client{tc.client}, redlock.WithNodeTimeout(300*time.Millisecond), redlock.WithRetry(redlock.NoRetry()))
			_, err := l.TryObtain(t.Context(), "cause")
			if tc.timeout {
				// The handshake hangs: the set-up takes the client's
				// DialTimeout, and until the server is found to answer
				// plain commands the node is said to be still
				// connecting. Then its cause is known.
				if err == nil || (!strings.Contains(err.Error(), "a new connection is still being set up after 300ms") && !strings.Contains(err.Error(), tc.want)) {
					t.Fatalf("first attempt: %v; want the set-up still under way, or the mismatch", err)
				}
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(err.Error(), tc.want); {
					time.Sleep(100 * time.Millisecond)
					if _, err = l.TryObtain(t.Context(), "cause"); err == nil {
						t.Fatal("TryObtain succeeded through a TLS handshake with a plain port")
					}
				}
			}
			// A refused password is no outage: no retry mends it.
			want := redlock.ErrNoQuorum
			if tc.node == "NOAUTH" || tc.node == "WRONGPASS" || tc.node == "TLS mismatch" {
				want = redlock.ErrMisconfigured
			}
			if !errors.Is(err, want) {
				t.Fatalf("got %v, want %v", err, want)
			}
			msg := err.Error()
			requireOneLine(t, msg)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q does not name the cause %q", msg, tc.want)
			}
			if strings.Contains(msg, "s3cret-pw") || strings.Contains(msg, "not-the-password") {
				t.Fatalf("error %q shows a password", msg)
			}
			var qe *redlock.QuorumError
			if !errors.As(err, &qe) || len(qe.Nodes) != 1 || qe.Nodes[0].Err == nil {
				t.Fatalf("no node detail in %#v", err)
			}
			if !strings.Contains(qe.Nodes[0].Err.Error(), tc.node) {
				t.Fatalf("node error %q does not carry the cause %q", qe.Nodes[0].Err, tc.node)
			}
			if tc.timeout && !errors.Is(qe.Nodes[0].Err, quorum.ErrTimeout) && !errors.Is(qe.Nodes[0].Err, context.DeadlineExceeded) {
				t.Fatalf("node error %v is neither the round's timeout nor the handshake's", qe.Nodes[0].Err)
			}
		})
	}
}

// A node whose dial fails only after the round gave up on it (a dialer
// that answers late) is reported as a timeout that carries the dial's own
// error, once it is known: the failed acquisition's clean-up waits for the
// node, and the dial's error arrives meanwhile.
func TestErrorTimeoutCarriesLateCause(t *testing.T) {
	const timeout = 400 * time.Millisecond
	refusal := errors.New("proxy refused the connection: no route to the node")
	late := rawClient(t, "10.0.0.1:6379", func(o *redis.Options) {
		o.Dialer = func(context.Context, string, string) (net.Conn, error) {
			// Past the round's timeout, before its clean-up gives up.
			time.Sleep(timeout * 3 / 2)
			return nil, refusal
		}
	})
	l := newLocker(t, []*redis.Client{late}, redlock.WithNodeTimeout(timeout))
	_, err := l.TryObtain(t.Context(), "late")
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNoQuorum) || !errors.As(err, &qe) {
		t.Fatalf("got %v, want ErrNoQuorum", err)
	}
	n := qe.Nodes[0]
	if !errors.Is(n.Err, quorum.ErrTimeout) || !errors.Is(n.Err, refusal) {
		t.Fatalf("node error %v: want the timeout and the dial's error", n.Err)
	}
	msg := err.Error()
	requireOneLine(t, msg)
	if !strings.Contains(msg, "no reply within the node timeout; the last connection attempt failed: "+refusal.Error()) {
		t.Fatalf("error %q does not carry the dial's error", msg)
	}
}

// A node whose reply the round did not wait for (it was decided without
// it) is not reported as having given no reply.
func TestErrorNodeNotWaitedFor(t *testing.T) {
	c := newCluster(t, 3)
	slow := redistest.ForwardT(t, c.servers[2].Addr)
	clients := []*redis.Client{c.clients[0], c.clients[1], slow.ClientT(t)}
	l := newLocker(t, clients)
	lock := mustObtain(t, l, "nw")
	// The round returned at a majority: let the third node's grant land
	// before the keys are taken away behind the Locker's back.
	if !poll(t, 5*time.Second, func() bool { return c.holders(t, "nw", lock.Token()) == 3 }) {
		t.Fatal("the lock never reached every node")
	}
	// The keys vanish on two nodes: the release is decided by their
	// answers, while the third node's reply is held back.
	for _, cl := range c.clients[:2] {
		if err := cl.Del(t.Context(), "nw").Err(); err != nil {
			t.Fatal(err)
		}
	}
	slow.SetDelay(800 * time.Millisecond)
	err := lock.Release(t.Context())
	if !errors.Is(err, redlock.ErrLockExpired) {
		t.Fatalf("got %v, want ErrLockExpired", err)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Nodes[2].Outcome != redlock.OutcomeNoReply {
		t.Fatalf("node 2 should be undecided: %v", err)
	}
	msg := err.Error()
	requireOneLine(t, msg)
	if !strings.Contains(msg, slow.Addr+" not needed (decided before its answer)") || strings.Contains(msg, "no reply") {
		t.Fatalf("error %q should say node %s was not needed", msg, slow.Addr)
	}
}

// Contention names the holder's metadata when Obtain gives up; TryObtain
// does not pay the extra round for it.
func TestErrorNamesHolder(t *testing.T) {
	c := newCluster(t, 3)
	holder := c.locker(t)
	held := mustObtain(t, holder, "job", redlock.WithMetadata("nightly-report on host-a\npid 42"))
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	l := c.locker(t)
	_, err := l.Obtain(t.Context(), "job", redlock.WithRetry(redlock.NoRetry()))
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v, want ErrNotObtained", err)
	}
	msg := err.Error()
	requireOneLine(t, msg)
	if !strings.Contains(msg, `holder "nightly-report on host-a\npid 42"`) {
		t.Fatalf("error %q does not name the holder's metadata", msg)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatal(err)
	}
	named := 0
	for i, n := range qe.Nodes {
		if n.Outcome == redlock.OutcomeHeldByOther {
			if n.Metadata != held.Metadata() {
				t.Fatalf("node %d: %+v, want the holder's metadata", i, n)
			}
			named++
		}
	}
	if named < 2 {
		t.Fatalf("%d nodes named the holder, want a majority: %v", named, err)
	}
	if strings.Contains(msg, held.Token()) {
		t.Fatalf("error %q shows the holder's token, which reclaims its lock", msg)
	}

	_, err = l.TryObtain(t.Context(), "job")
	if !errors.As(err, &qe) || qe.Nodes[0].Metadata != "" {
		t.Fatalf("TryObtain: %v, want no metadata (no extra round)", err)
	}
}

// A long key is shortened in messages, a key with control bytes escaped.
func TestErrorKeyText(t *testing.T) {
	c := newCluster(t, 3)
	holder, l := c.locker(t), c.locker(t)
	long := "tenant/" + strings.Repeat("x", 250) + "/report-2026-11-23"
	odd := "line\nbreak\x00\x1b[31m"
	for _, tc := range []struct{ key, want, not string }{
		{long, strconv.Quote(long[:40]+"…"+long[len(long)-20:]) + " (" + strconv.Itoa(len(long)) + " bytes)", strings.Repeat("x", 60)},
		{odd, `"line\nbreak\x00\x1b[31m"`, "\x1b"},
	} {
		held := mustObtain(t, holder, tc.key)
		_, err := l.TryObtain(t.Context(), tc.key)
		_ = held.Release(t.Context())
		if !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("got %v", err)
		}
		msg := err.Error()
		requireOneLine(t, msg)
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, tc.not) {
			t.Fatalf("error %q: want %s in it, and not %q", msg, tc.want, tc.not)
		}
	}
}

// Keys that a ForceRelease through the same Locker removed are reported as
// released, not expired; keys that vanished otherwise still as expired.
func TestErrorForceReleasedNotExpired(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	// A ForceRelease before a lock was obtained explains nothing about it.
	if err := l.ForceRelease(t.Context(), "f"); err != nil {
		t.Fatal(err)
	}
	before := mustObtain(t, l, "f")
	for _, cl := range c.clients {
		if err := cl.Del(t.Context(), "f").Err(); err != nil {
			t.Fatal(err)
		}
	}
	err := before.Extend(t.Context(), 10*time.Second)
	if !errors.Is(err, redlock.ErrLockExpired) || strings.Contains(err.Error(), "ForceRelease") {
		t.Fatalf("keys deleted behind the Locker's back: got %v, want plain ErrLockExpired", err)
	}

	for _, op := range []struct {
		name string
		call func(*redlock.Lock) error
	}{
		{"extend", func(k *redlock.Lock) error { return k.Extend(t.Context(), 10*time.Second) }},
		{"ttl", func(k *redlock.Lock) error { _, err := k.TTL(t.Context()); return err }},
		{"release", func(k *redlock.Lock) error { return k.Release(t.Context()) }},
	} {
		lock := mustObtain(t, l, "f")
		if err := l.ForceRelease(t.Context(), "f"); err != nil {
			t.Fatal(err)
		}
		err := op.call(lock)
		if !errors.Is(err, redlock.ErrLockExpired) || !errors.Is(err, redlock.ErrLockNotHeld) {
			t.Fatalf("%s: got %v, want ErrLockExpired", op.name, err)
		}
		requireOneLine(t, err.Error())
		if !strings.Contains(err.Error(), "force-released") {
			t.Fatalf("%s: error %q should say a ForceRelease removed the keys", op.name, err)
		}
	}
}

// A reply that makes no sense (garbage on the wire) is reported on one
// line, whatever bytes it held.
func TestErrorGarbledReplyOneLine(t *testing.T) {
	s := redistest.StartT(t, 1, redistest.Options{})[0]
	f := redistest.ForwardT(t, s.Addr)
	l := newLocker(t, []*redis.Client{f.ClientT(t)})
	release := mustObtain(t, l, "g")
	// An error reply with control bytes: go-redis hands it over as it is,
	// so only the library's own care keeps the message on one line.
	f.GarbleWith("-ERR gar\rbled\x00\x1b[31m reply")
	err := release.Extend(t.Context(), 10*time.Second)
	if err == nil {
		t.Fatal("extend through a garbled reply succeeded")
	}
	if !strings.Contains(err.Error(), "bled") {
		t.Fatalf("error %q does not show the node's reply: the test proves nothing", err)
	}
	requireOneLine(t, err.Error())
}
