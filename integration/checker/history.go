// Package checker records what the chaos suite's clients believed and what the
// nemesis did, and checks the record: no two clients may have believed they
// held the same key at the same moment, and, with fencing, tokens must grow
// and a fenced resource must reject every stale write.
//
// A client believes it holds a lock from the moment Obtain returned to the
// earlier of its call to Release and the lock's Until (its local validity
// deadline, moved by each successful Extend). Every time in a History comes
// from one process's monotonic clock, so intervals of different clients
// compare exactly.
package checker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Hold is one interval during which a client believed it held a lock.
//
// A lock usually has one Hold. A lock that was extended after its deadline had
// passed (a paused client whose keys were still there) has a second one,
// starting when that Extend returned, with Segment 1, and so on.
type Hold struct {
	Client int
	Key    string
	Token  string
	Fence  uint64
	// FenceHidden says the client could not see the lock's fence (Do
	// does not show the lock): the fence checks leave the hold out.
	FenceHidden bool
	// Shared marks a reader's hold of a read-write lock (Key is the lock's
	// name): readers may overlap one another, never a writer. Slots, above
	// 0, marks a permit of a semaphore of that many (Key is its name): at
	// most Slots permits may overlap.
	Shared  bool
	Slots   int
	Segment int
	// Start is when Obtain (or, for a later segment, Extend) returned.
	Start time.Time
	// End is the earlier of the Release call and the lock's Until.
	End time.Time
}

// Empty reports whether the interval holds no time at all: Obtain returned
// after the lock's deadline had already passed.
func (h Hold) Empty() bool { return !h.End.After(h.Start) }

// Failure is one failed operation.
type Failure struct {
	Op   string // "obtain", "extend", "release"
	Kind Kind
	At   time.Time
}

// Fault is one fault the nemesis injected (or a client pause), from injection
// to heal.
type Fault struct {
	Kind  string
	Nodes []int // the nodes (or, for a client pause, the client) it hit
	// Majority is set when it hit a majority of the nodes, or all: its
	// availability is reported apart (see MajorityKind).
	Majority bool
	Start    time.Time
	End      time.Time
}

// MajoritySuffix marks, in Availability.ByKind, the kinds of faults that
// hit a majority of the nodes: a quorum cannot absorb them, and they are
// reported apart from the same kind on a minority.
const MajoritySuffix = "@majority"

// MajorityKind is f's kind in Availability.ByKind: its Kind, with
// MajoritySuffix when it hit a majority.
func (f Fault) MajorityKind() string {
	if f.Majority {
		return f.Kind + MajoritySuffix
	}
	return f.Kind
}

// Anomaly is a broken promise of the library that is not an overlap of
// holds: a lock still held after a panic in Do released it, a handle still
// valid after Release.
type Anomaly struct {
	Kind   string
	Client int
	Key    string
	Detail string
	At     time.Time
}

// History is the record of one run. Its methods are safe for concurrent use.
type History struct {
	mu        sync.Mutex
	start     time.Time
	end       time.Time
	running   time.Time // when the clients were running; zero if unknown
	holds     []Hold
	anomalies []Anomaly
	failures  []Failure
	faults    []Fault
	writes    []Write
	acquired  int
	// acquirers are the clients that have acquired a lock.
	acquirers map[int]struct{}
	waiters   []waiter
}

type waiter struct {
	n int
	// clients counts distinct clients that acquired, not locks.
	clients bool
	done    chan struct{}
}

// reached reports whether the waiter's count has been reached; h.mu is
// held.
func (h *History) reached(w waiter) bool {
	if w.clients {
		return len(h.acquirers) >= w.n
	}
	return h.acquired >= w.n
}

// NewHistory returns an empty history of a run that started at start
// (usually time.Now()).
func NewHistory(start time.Time) *History { return &History{start: start} }

// Finish marks the end of the run at end; availability is measured up to
// it. Until then Check measures up to the moment it is called.
func (h *History) Finish(end time.Time) {
	h.mu.Lock()
	h.end = end
	h.mu.Unlock()
}

// ClientsRunning marks the moment the clients were up and running: the
// availability before the first fault is measured from then, not from
// the start of the run, which includes their start-up.
func (h *History) ClientsRunning(at time.Time) {
	h.mu.Lock()
	h.running = at
	h.mu.Unlock()
}

// AddHold records a belief interval. Segment 0 of a lock counts as an
// acquisition.
func (h *History) AddHold(hold Hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, hold)
	if hold.Segment != 0 {
		return
	}
	h.acquired++
	if h.acquirers == nil {
		h.acquirers = make(map[int]struct{})
	}
	h.acquirers[hold.Client] = struct{}{}
	keep := h.waiters[:0]
	for _, w := range h.waiters {
		if h.reached(w) {
			close(w.done)
		} else {
			keep = append(keep, w)
		}
	}
	h.waiters = keep
}

// AddFailure records a failed operation, classified by Classify.
func (h *History) AddFailure(op string, err error, at time.Time) {
	h.AddFailureKind(op, Classify(err), at)
}

// AddFailureKind records a failed operation already classified (by a
// client in another process).
func (h *History) AddFailureKind(op string, kind Kind, at time.Time) {
	h.mu.Lock()
	h.failures = append(h.failures, Failure{Op: op, Kind: kind, At: at})
	h.mu.Unlock()
}

// AddAnomaly records a broken promise that is not an overlap.
func (h *History) AddAnomaly(a Anomaly) {
	h.mu.Lock()
	h.anomalies = append(h.anomalies, a)
	h.mu.Unlock()
}

// AddFault records an injected fault.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
}

// AddWrite records a write to a fenced resource: a Resource's own, or one
// it did not see (one outside this process, or a test's).
func (h *History) AddWrite(w Write) {
	h.mu.Lock()
	h.writes = append(h.writes, w)
	h.mu.Unlock()
}

// Faults returns how many faults were recorded.
func (h *History) Faults() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.faults)
}

// WaitAcquisitions blocks until n locks have been acquired (their first
// interval recorded) or ctx ends.
func (h *History) WaitAcquisitions(ctx context.Context, n int) error {
	return h.wait(ctx, waiter{n: n})
}

// WaitClients blocks until n distinct clients have each acquired a lock,
// or ctx ends: until every client is up and running.
func (h *History) WaitClients(ctx context.Context, n int) error {
	return h.wait(ctx, waiter{n: n, clients: true})
}

func (h *History) wait(ctx context.Context, w waiter) error {
	h.mu.Lock()
	if h.reached(w) {
		h.mu.Unlock()
		return nil
	}
	w.done = make(chan struct{})
	h.waiters = append(h.waiters, w)
	h.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// snapshot copies the history for checking.
func (h *History) snapshot() History {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := h.end
	if end.IsZero() {
		end = time.Now()
	}
	return History{
		start:     h.start,
		end:       end,
		running:   h.running,
		holds:     slices.Clone(h.holds),
		anomalies: slices.Clone(h.anomalies),
		failures:  slices.Clone(h.failures),
		faults:    slices.Clone(h.faults),
		writes:    slices.Clone(h.writes),
		acquired:  h.acquired,
	}
}

// Kind is the class of a failed operation's error.
type Kind string

// The kinds of failure, from the library's sentinel errors.
const (
	KindNotObtained Kind = "not obtained"
	KindNoQuorum    Kind = "no quorum"
	KindLost        Kind = "lost"
	KindExpired     Kind = "expired"
	KindNotHeld     Kind = "not held"
	KindContext     Kind = "context"
	KindOther       Kind = "other"
)

// Classify maps an error to its Kind with errors.Is against the library's
// sentinels. The lock's own verdict comes first: an error that matches both
// ErrNotObtained and context.DeadlineExceeded is contention.
func Classify(err error) Kind {
	switch {
	case errors.Is(err, redlock.ErrNotObtained):
		return KindNotObtained
	case errors.Is(err, redlock.ErrNoQuorum):
		return KindNoQuorum
	case errors.Is(err, redlock.ErrLockLost):
		return KindLost
	case errors.Is(err, redlock.ErrLockExpired):
		return KindExpired
	case errors.Is(err, redlock.ErrLockNotHeld):
		return KindNotHeld
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return KindContext
	}
	return KindOther
}
