package checker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/integration/checker"
	_ "github.com/quorumlock/redlock/integration/internal/flags" // go test ./... -args passes the chaos flags here too
	"github.com/quorumlock/redlock/redlock"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// hold is a first segment on key from ms a to ms b.
func hold(client int, key, token string, a, b int) checker.Hold {
	return checker.Hold{Client: client, Key: key, Token: token, Start: at(a), End: at(b)}
}

func fenced(h checker.Hold, fence uint64) checker.Hold {
	h.Fence = fence
	return h
}

// fencingHolds fails the test if the checker finds a fencing failure in h.
func fencingHolds(t *testing.T, h *checker.History) {
	t.Helper()
	if r := checker.Check(h); r.Fencing.Failed() {
		t.Errorf("unexpected fencing failure\n%s", r.String())
	}
}

func history(holds ...checker.Hold) *checker.History {
	h := checker.NewHistory(t0)
	for _, x := range holds {
		h.AddHold(x)
	}
	h.Finish(at(10_000))
	return h
}

func TestOverlaps(t *testing.T) {
	second := hold(1, "k", "a", 300, 400)
	second.Segment = 1
	tests := []struct {
		name  string
		holds []checker.Hold
		pairs [][2]string // tokens of the expected violations, earlier first
	}{
		{"none", nil, nil},
		{"one after another", []checker.Hold{hold(1, "k", "a", 0, 100), hold(2, "k", "b", 150, 300)}, nil},
		{"touching", []checker.Hold{hold(1, "k", "a", 0, 100), hold(2, "k", "b", 100, 300)}, nil},
		{"different keys", []checker.Hold{hold(1, "k", "a", 0, 100), hold(2, "j", "b", 50, 300)}, nil},
		{"segments of one lock", []checker.Hold{hold(1, "k", "a", 0, 350), second}, nil},
		{"expired on return", []checker.Hold{hold(1, "k", "a", 0, 100), hold(2, "k", "b", 60, 50)}, nil},
		{"overlap", []checker.Hold{hold(1, "k", "a", 0, 100), hold(2, "k", "b", 99, 300)}, [][2]string{{"a", "b"}}},
		{"contained", []checker.Hold{hold(1, "k", "a", 0, 1000), hold(2, "k", "b", 200, 300)}, [][2]string{{"a", "b"}}},
		{"unsorted input", []checker.Hold{hold(2, "k", "b", 200, 300), hold(1, "k", "a", 0, 1000)}, [][2]string{{"a", "b"}}},
		{"three at once", []checker.Hold{hold(1, "k", "a", 0, 100), hold(2, "k", "b", 10, 100), hold(3, "k", "c", 20, 100)},
			[][2]string{{"a", "b"}, {"a", "c"}, {"b", "c"}}},
		{"second segment overlaps another lock", []checker.Hold{hold(1, "k", "a", 0, 100), hold(2, "k", "b", 250, 350), second},
			[][2]string{{"b", "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checker.Check(history(tt.holds...))
			var got [][2]string
			for _, v := range r.Violations {
				got = append(got, [2]string{v.A.Token, v.B.Token})
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.pairs) {
				t.Errorf("violations %v, want %v\n%s", got, tt.pairs, r.String())
			}
		})
	}
}

// A violation must name both holders and say when each held the key.
func TestViolationReport(t *testing.T) {
	r := checker.Check(history(hold(3, "orders", "tok-early", 0, 500), hold(7, "orders", "tok-late", 400, 900)))
	if len(r.Violations) != 1 {
		t.Fatalf("got %d violations, want 1:\n%s", len(r.Violations), r.String())
	}
	v := r.Violations[0]
	if got := v.Overlap(); got != 100*time.Millisecond {
		t.Errorf("overlap %v, want 100ms", got)
	}
	s := r.String()
	for _, want := range []string{
		`VIOLATION: key "orders"`, "client 3 token tok-early", "client 7 token tok-late",
		"03:04:05.400000 (+400ms)", "03:04:05.500000 (+500ms)", "1 violations",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if r.Acquisitions != 2 {
		t.Errorf("acquisitions %d, want 2", r.Acquisitions)
	}
}

func TestFences(t *testing.T) {
	tests := []struct {
		name     string
		holds    []checker.Hold
		checked  bool
		outOfOrd int
	}{
		{"fencing off", []checker.Hold{hold(1, "k", "a", 0, 100), hold(2, "k", "b", 200, 300)}, false, 0},
		{"growing", []checker.Hold{fenced(hold(1, "k", "a", 0, 100), 1), fenced(hold(2, "k", "b", 200, 300), 5), fenced(hold(3, "k", "c", 400, 500), 6)}, true, 0},
		{"per key", []checker.Hold{fenced(hold(1, "k", "a", 0, 100), 4), fenced(hold(2, "j", "b", 200, 300), 1)}, true, 0},
		{"repeated", []checker.Hold{fenced(hold(1, "k", "a", 0, 100), 3), fenced(hold(2, "k", "b", 200, 300), 3)}, true, 1},
		{"shrinking", []checker.Hold{fenced(hold(1, "k", "a", 0, 100), 9), fenced(hold(2, "k", "b", 200, 300), 5), fenced(hold(3, "k", "c", 400, 500), 10)}, true, 1},
		{"missing fence", []checker.Hold{fenced(hold(1, "k", "a", 0, 100), 2), hold(2, "k", "b", 200, 300)}, true, 1},
		// A lock that came back expired may have been granted before one
		// that returned earlier: it does not take part in the order.
		{"expired on return", []checker.Hold{fenced(hold(1, "k", "a", 0, 100), 2), fenced(hold(2, "k", "b", 150, 120), 1), fenced(hold(3, "k", "c", 200, 300), 3)}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checker.Check(history(tt.holds...))
			if r.Fencing.Checked != tt.checked || len(r.Fencing.OutOfOrder) != tt.outOfOrd {
				t.Errorf("checked %v with %d out of order, want %v with %d\n%s",
					r.Fencing.Checked, len(r.Fencing.OutOfOrder), tt.checked, tt.outOfOrd, r.String())
			}
			if tt.outOfOrd > 0 && !strings.Contains(r.String(), "FENCE OUT OF ORDER") {
				t.Errorf("report does not show the out-of-order fences:\n%s", r.String())
			}
		})
	}
}

// The client-pause story with fencing: a holds fence 1, stalls past its
// deadline, b takes the lock with fence 2 and writes; a wakes up and writes.
func TestResourceRejectsStaleWrite(t *testing.T) {
	h := checker.NewHistory(time.Now())
	res := checker.NewResource(h)
	aStart := time.Now()
	if !res.Write(1, "k", "a", 1) {
		t.Fatal("first write rejected")
	}
	aEnd := time.Now().Add(time.Nanosecond)
	h.AddHold(checker.Hold{Client: 1, Key: "k", Token: "a", Fence: 1, Start: aStart, End: aEnd})
	bStart := time.Now().Add(time.Nanosecond)
	if !res.Write(2, "k", "b", 2) {
		t.Fatal("the new holder's write was rejected")
	}
	if res.Write(1, "k", "a", 1) {
		t.Fatal("the stale write was accepted")
	}
	if !res.Write(2, "k", "b", 2) {
		t.Fatal("the holder's second write was rejected")
	}
	if !res.Write(3, "other", "c", 1) {
		t.Fatal("a write to another key was rejected")
	}
	h.AddHold(checker.Hold{Client: 2, Key: "k", Token: "b", Fence: 2, Start: bStart, End: time.Now().Add(time.Nanosecond)})
	r := checker.Check(h)
	if f := r.Fencing; !f.Checked || f.Failed() || f.Writes != 5 || f.Rejected != 1 {
		t.Errorf("fencing %+v, want 5 writes, 1 rejected, no failure\n%s", f, r.String())
	}
}

// Histories a broken fencing scheme would produce: the checker must catch
// both ways a resource can go wrong.
func TestWriteChecks(t *testing.T) {
	a := fenced(hold(1, "k", "a", 0, 100), 7) // fence too high
	b := fenced(hold(2, "k", "b", 200, 300), 3)
	t.Run("stale write accepted", func(t *testing.T) {
		h := history(a, b)
		h.AddWrite(checker.Write{Client: 2, Key: "k", Token: "b", Fence: 3, At: at(210), Accepted: true})
		h.AddWrite(checker.Write{Client: 1, Key: "k", Token: "a", Fence: 7, At: at(250), Accepted: true}) // a zombie
		r := checker.Check(h)
		if len(r.Fencing.StaleAccepted) != 1 || r.Fencing.StaleAccepted[0].Token != "a" {
			t.Errorf("stale accepted %+v, want a's write\n%s", r.Fencing.StaleAccepted, r.String())
		}
		if !strings.Contains(r.String(), "STALE WRITE ACCEPTED") {
			t.Errorf("report does not show it:\n%s", r.String())
		}
	})
	t.Run("valid write rejected", func(t *testing.T) {
		h := history(a, b)
		h.AddWrite(checker.Write{Client: 1, Key: "k", Token: "a", Fence: 7, At: at(50), Accepted: true})
		h.AddWrite(checker.Write{Client: 2, Key: "k", Token: "b", Fence: 3, At: at(210), Accepted: false})
		r := checker.Check(h)
		if len(r.Fencing.ValidRejected) != 1 || r.Fencing.ValidRejected[0].Token != "b" {
			t.Errorf("valid rejected %+v, want b's write\n%s", r.Fencing.ValidRejected, r.String())
		}
	})
	t.Run("expired on return", func(t *testing.T) {
		// a was granted first (fence 1) but its Obtain returned late, its
		// validity over (an empty hold); b, granted after it (fence 2),
		// returned earlier. Each writes once, a first: fences in grant
		// order, nothing stale, though a returned after b.
		h := history(fenced(hold(1, "k", "a", 300, 250), 1), fenced(hold(2, "k", "b", 200, 400), 2))
		h.AddWrite(checker.Write{Client: 1, Key: "k", Token: "a", Fence: 1, At: at(305), Accepted: true})
		h.AddWrite(checker.Write{Client: 2, Key: "k", Token: "b", Fence: 2, At: at(310), Accepted: true})
		fencingHolds(t, h)
	})
	t.Run("one token on two keys", func(t *testing.T) {
		// The token "t" (a label such as a leader's term, which may repeat
		// on another key) held "other" later than b acquired "k": its
		// write to "k" is still the first holder's, and stale.
		h := history(fenced(hold(1, "k", "t", 0, 100), 1), fenced(hold(2, "k", "b", 200, 300), 2),
			fenced(hold(1, "other", "t", 400, 500), 1))
		h.AddWrite(checker.Write{Client: 2, Key: "k", Token: "b", Fence: 2, At: at(210), Accepted: true})
		h.AddWrite(checker.Write{Client: 1, Key: "k", Token: "t", Fence: 2, At: at(220), Accepted: true})
		h.AddWrite(checker.Write{Client: 1, Key: "other", Token: "t", Fence: 1, At: at(410), Accepted: true})
		r := checker.Check(h)
		if len(r.Fencing.StaleAccepted) != 1 || r.Fencing.StaleAccepted[0].Key != "k" {
			t.Errorf("stale accepted %+v, want t's write to k only\n%s", r.Fencing.StaleAccepted, r.String())
		}
		// And the other way: b's later acquisition of "other" does not
		// make d's write to "k", acquired after b's hold of "k" ended,
		// look stale.
		h = history(fenced(hold(2, "k", "b", 0, 100), 1), fenced(hold(2, "other", "b", 200, 300), 5),
			fenced(hold(3, "k", "d", 120, 180), 2))
		h.AddWrite(checker.Write{Client: 2, Key: "k", Token: "b", Fence: 1, At: at(50), Accepted: true})
		h.AddWrite(checker.Write{Client: 3, Key: "k", Token: "d", Fence: 2, At: at(130), Accepted: true})
		h.AddWrite(checker.Write{Client: 2, Key: "other", Token: "b", Fence: 5, At: at(210), Accepted: true})
		fencingHolds(t, h)
	})
	t.Run("zombie write before the next holder writes", func(t *testing.T) {
		// Nothing newer had been written: the resource may take it.
		h := history(fenced(hold(1, "k", "a", 0, 100), 1), fenced(hold(2, "k", "b", 200, 300), 2))
		h.AddWrite(checker.Write{Client: 1, Key: "k", Token: "a", Fence: 1, At: at(220), Accepted: true})
		h.AddWrite(checker.Write{Client: 2, Key: "k", Token: "b", Fence: 2, At: at(230), Accepted: true})
		fencingHolds(t, h)
	})
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want checker.Kind
	}{
		{fmt.Errorf("wrapped: %w", redlock.ErrNotObtained), checker.KindNotObtained},
		{errors.Join(fmt.Errorf("x: %w", redlock.ErrNotObtained), context.DeadlineExceeded), checker.KindNotObtained},
		{fmt.Errorf("wrapped: %w", redlock.ErrNoQuorum), checker.KindNoQuorum},
		{fmt.Errorf("wrapped: %w", redlock.ErrLockLost), checker.KindLost},
		{redlock.ErrLockExpired, checker.KindExpired},
		{redlock.ErrLockNotHeld, checker.KindNotHeld},
		{context.Canceled, checker.KindContext},
		{errors.New("boom"), checker.KindOther},
	}
	for _, tt := range tests {
		if got := checker.Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestFailuresAndFaults(t *testing.T) {
	h := history()
	h.AddFailure("obtain", redlock.ErrNoQuorum, at(1))
	h.AddFailure("obtain", redlock.ErrNoQuorum, at(2))
	h.AddFailure("obtain", redlock.ErrNotObtained, at(3))
	h.AddFailure("release", redlock.ErrLockExpired, at(4))
	h.AddFault(checker.Fault{Kind: "kill", Nodes: []int{1}, Start: at(10), End: at(20)})
	h.AddFault(checker.Fault{Kind: "kill", Nodes: []int{2}, Start: at(30), End: at(40)})
	h.AddFault(checker.Fault{Kind: "pause", Nodes: []int{0, 1}, Start: at(50), End: at(60)})
	r := checker.Check(h)
	if got := r.Failures["obtain"][checker.KindNoQuorum]; got != 2 {
		t.Errorf("obtain no-quorum failures %d, want 2", got)
	}
	if got := r.Failures["release"][checker.KindExpired]; got != 1 {
		t.Errorf("release expired failures %d, want 1", got)
	}
	if r.FaultCount() != 3 || r.Faults["kill"] != 2 {
		t.Errorf("faults %v, want kill 2 and pause 1", r.Faults)
	}
	if h.Faults() != 3 {
		t.Errorf("History.Faults() = %d, want 3", h.Faults())
	}
}

func TestAvailability(t *testing.T) {
	h := checker.NewHistory(t0)
	// 1s before the first fault with 10 acquisitions; faults from 1s to 2s
	// and 1.5s to 2.5s (merged: 1.5s) with 3 acquisitions; 0.5s after with 5.
	for i := range 10 {
		h.AddHold(hold(i, "k", fmt.Sprint("before", i), i*100, i*100+50))
	}
	for i := range 3 {
		h.AddHold(hold(i, "k", fmt.Sprint("during", i), 1000+i*500, 1000+i*500+10))
	}
	for i := range 5 {
		h.AddHold(hold(i, "k", fmt.Sprint("after", i), 2600+i*50, 2600+i*50+10))
	}
	h.AddFault(checker.Fault{Kind: "a", Start: at(1000), End: at(2000)})
	h.AddFault(checker.Fault{Kind: "b", Start: at(1500), End: at(2500)})
	h.Finish(at(3000))
	a := checker.Check(h).Availability
	want := checker.Availability{
		Before:  checker.Rate{Acquisitions: 10, Time: time.Second},
		During:  checker.Rate{Acquisitions: 3, Time: 1500 * time.Millisecond},
		Between: checker.Rate{Acquisitions: 5, Time: 500 * time.Millisecond},
		// The acquisitions at 1s, 1.5s and 2s: all three under a, the
		// last two under b.
		ByKind: map[string]checker.Rate{
			"a": {Acquisitions: 3, Time: time.Second},
			"b": {Acquisitions: 2, Time: time.Second},
		},
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("availability %+v, want %+v", a, want)
	}
	if got := a.Ratio(); got != 0.2 {
		t.Errorf("ratio %v, want 0.2", got)
	}
}

// TestAvailabilityFromClientsRunning: the clients' start-up is not counted
// as slowness before the faults.
func TestAvailabilityFromClientsRunning(t *testing.T) {
	h := checker.NewHistory(t0)
	// Two acquisitions in the first 900ms, while the clients start; ten in
	// the 100ms from when they were running to the first fault.
	h.AddHold(hold(0, "k", "slow0", 100, 110))
	h.AddHold(hold(0, "k", "slow1", 800, 810))
	h.ClientsRunning(at(900))
	for i := range 10 {
		h.AddHold(hold(i, "k", fmt.Sprint("fast", i), 900+i*10, 900+i*10+5))
	}
	h.AddFault(checker.Fault{Kind: "a", Start: at(1000), End: at(1100)})
	h.Finish(at(1100))
	a := checker.Check(h).Availability
	if want := (checker.Rate{Acquisitions: 10, Time: 100 * time.Millisecond}); a.Before != want {
		t.Errorf("before faults %+v, want %+v", a.Before, want)
	}
}

func TestWaitClients(t *testing.T) {
	h := checker.NewHistory(time.Now())
	h.AddHold(hold(1, "k", "a", 0, 1))
	h.AddHold(hold(1, "k", "b", 2, 3))
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	// Two locks, one client.
	if err := h.WaitClients(cancelled, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitClients(2) after two locks of one client: %v, want context.Canceled", err)
	}
	done := make(chan error, 1)
	go func() { done <- h.WaitClients(t.Context(), 2) }()
	h.AddHold(hold(2, "k", "c", 4, 5))
	if err := <-done; err != nil {
		t.Fatalf("WaitClients(2) after a second client acquired: %v", err)
	}
}

func TestWaitAcquisitions(t *testing.T) {
	h := checker.NewHistory(time.Now())
	h.AddHold(hold(1, "k", "a", 0, 1))
	second := hold(1, "k", "a", 2, 3)
	second.Segment = 1 // not an acquisition
	h.AddHold(second)

	// One acquisition so far: a wait for two must not be satisfied, so with a
	// context that has already ended it reports the context's error.
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.WaitAcquisitions(cancelled, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("after one acquisition and a later segment: got %v, want context.Canceled", err)
	}
	if err := h.WaitAcquisitions(t.Context(), 1); err != nil {
		t.Fatal(err)
	}

	// A waiter started before the second acquisition is woken by it.
	done := make(chan error, 1)
	go func() { done <- h.WaitAcquisitions(t.Context(), 2) }()
	select {
	case err := <-done:
		t.Fatalf("wait for 2 returned %v after one acquisition", err)
	default:
	}
	h.AddHold(hold(2, "k", "b", 4, 5))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("waiter not woken by the second acquisition")
	}
	if err := h.WaitAcquisitions(cancelled, 2); err != nil {
		t.Fatalf("after two acquisitions: %v", err)
	}
	if err := h.WaitAcquisitions(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitAcquisitions(cancelled, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// Readers overlap each other but never a writer; a semaphore's permits
// overlap up to its size.
func TestSharedAndSlots(t *testing.T) {
	t0 := time.Now()
	at := func(a, b int) (time.Time, time.Time) {
		return t0.Add(time.Duration(a) * time.Millisecond), t0.Add(time.Duration(b) * time.Millisecond)
	}
	hold := func(tok string, a, b int, shared bool, slots int) checker.Hold {
		s, e := at(a, b)
		return checker.Hold{Key: "k", Token: tok, Start: s, End: e, Shared: shared, Slots: slots}
	}
	for _, tc := range []struct {
		name  string
		holds []checker.Hold
		want  int
	}{
		{"readers overlap", []checker.Hold{hold("r1", 0, 10, true, 0), hold("r2", 5, 15, true, 0)}, 0},
		{"reader beside writer", []checker.Hold{hold("r1", 0, 10, true, 0), hold("w", 5, 15, false, 0)}, 1},
		{"writer then reader", []checker.Hold{hold("w", 0, 10, false, 0), hold("r1", 10, 15, true, 0)}, 0},
		{"two permits of two", []checker.Hold{hold("a", 0, 10, false, 2), hold("b", 5, 15, false, 2)}, 0},
		{"three permits of two", []checker.Hold{hold("a", 0, 10, false, 2), hold("b", 5, 15, false, 2), hold("c", 6, 8, false, 2)}, 1},
		{"three permits of two, in turn", []checker.Hold{hold("a", 0, 10, false, 2), hold("b", 5, 15, false, 2), hold("c", 10, 12, false, 2)}, 0},
		// Users that disagree on the size: a permit of three beside two of
		// two makes the semaphore of two larger, whichever came last.
		{"a permit of three beside two of two", []checker.Hold{hold("a", 0, 10, false, 2), hold("b", 5, 15, false, 2), hold("c", 6, 8, false, 3)}, 1},
		{"two of two beside a permit of three", []checker.Hold{hold("c", 0, 10, false, 3), hold("a", 5, 15, false, 2), hold("b", 6, 8, false, 2)}, 1},
		{"three permits of three", []checker.Hold{hold("a", 0, 10, false, 3), hold("b", 5, 15, false, 3), hold("c", 6, 8, false, 3)}, 0},
	} {
		h := checker.NewHistory(t0)
		for _, x := range tc.holds {
			h.AddHold(x)
		}
		if got := len(checker.Check(h).Violations); got != tc.want {
			t.Errorf("%s: %d violations, want %d", tc.name, got, tc.want)
		}
	}
}

// A kind of fault that hit a majority of the nodes is measured apart from
// the same kind on a minority: a quorum can absorb only the latter.
func TestAvailabilityKeepsMajorityApart(t *testing.T) {
	h := checker.NewHistory(t0)
	for i := range 4 {
		h.AddHold(hold(i, "k", fmt.Sprint("h", i), 1000+i*1000, 1000+i*1000+10))
	}
	h.AddFault(checker.Fault{Kind: "kill", Nodes: []int{0}, Start: at(500), End: at(1500)})
	h.AddFault(checker.Fault{Kind: "kill", Nodes: []int{0, 1, 2}, Majority: true, Start: at(2500), End: at(4500)})
	h.Finish(at(5000))
	got := checker.Check(h).Availability.ByKind
	want := map[string]checker.Rate{
		"kill":                          {Acquisitions: 1, Time: time.Second},
		"kill" + checker.MajoritySuffix: {Acquisitions: 2, Time: 2 * time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("availability by kind %+v, want %+v", got, want)
	}
}
