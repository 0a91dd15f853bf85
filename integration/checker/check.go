package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what Check found in a History.
type Report struct {
	// Acquisitions counts locks obtained (first segments).
	Acquisitions int
	// Late counts locks that Obtain returned after their deadline had
	// already passed; the client never believed it held them.
	Late int
	// Violations lists every pair of overlapping intervals on the same key.
	Violations []Violation
	// Anomalies lists the library's broken promises that are not overlaps.
	Anomalies []Anomaly
	// Fencing is the fencing check; Fencing.Checked is false when no lock
	// carried a fence.
	Fencing Fencing
	// Failures counts failed operations: op → kind → count.
	Failures map[string]map[Kind]int
	// Faults counts injected faults by kind.
	Faults map[string]int
	// Availability compares acquisition rates before and during faults.
	Availability Availability
	// Effects is the effects checker's verdict (Store), filled in by the
	// caller that ran the Store; Check leaves it empty.
	Effects Effects
	// Start is when the run started; times in messages are relative to it.
	Start time.Time
}

// FaultCount returns the number of injected faults.
func (r *Report) FaultCount() int {
	n := 0
	for _, c := range r.Faults {
		n += c
	}
	return n
}

// Violation is two clients that believed they held the same key at once.
type Violation struct {
	Key  string
	A, B Hold
	t0   time.Time
}

// Overlap returns how long both believed they held the key.
func (v Violation) Overlap() time.Duration {
	end, start := v.A.End, v.A.Start
	if v.B.End.Before(end) {
		end = v.B.End
	}
	if v.B.Start.After(start) {
		start = v.B.Start
	}
	return end.Sub(start)
}

func (v Violation) String() string {
	return fmt.Sprintf("key %q held twice for %v: %s and %s",
		v.Key, v.Overlap(), describe(v.A, v.t0), describe(v.B, v.t0))
}

func describe(h Hold, t0 time.Time) string {
	s := fmt.Sprintf("client %d token %s", h.Client, h.Token)
	if h.Fence != 0 {
		s += fmt.Sprintf(" fence %d", h.Fence)
	}
	return s + fmt.Sprintf(" from %s to %s", stamp(h.Start, t0), stamp(h.End, t0))
}

// stamp prints a time both as a wall clock reading and relative to the run's
// start.
func stamp(t, t0 time.Time) string {
	return fmt.Sprintf("%s (+%v)", t.Format("15:04:05.000000"), t.Sub(t0).Round(time.Microsecond))
}

// Fencing is the result of the fencing checks.
type Fencing struct {
	// Checked is true when at least one lock carried a non-zero fence.
	Checked bool
	// OutOfOrder lists consecutive locks of a key, in acquisition order,
	// whose fences did not strictly grow.
	OutOfOrder []Violation
	// Writes and Rejected count writes to the fenced resource.
	Writes, Rejected int
	// StaleAccepted lists writes the resource accepted although a lock
	// acquired later had already written.
	StaleAccepted []Write
	// ValidRejected lists writes the resource rejected although their
	// writer believed it held the lock.
	ValidRejected []Write
}

// Failed reports whether any fencing check failed.
func (f *Fencing) Failed() bool {
	return len(f.OutOfOrder)+len(f.StaleAccepted)+len(f.ValidRejected) > 0
}

// Rate is a number of acquisitions over a stretch of time.
type Rate struct {
	Acquisitions int
	Time         time.Duration
}

// PerSecond returns the rate, 0 for an empty stretch.
func (r Rate) PerSecond() float64 {
	if r.Time <= 0 {
		return 0
	}
	return float64(r.Acquisitions) / r.Time.Seconds()
}

func (r Rate) String() string {
	return fmt.Sprintf("%.1f/s (%d in %v)", r.PerSecond(), r.Acquisitions, r.Time.Round(time.Millisecond))
}

// Availability compares the acquisition rate before the first fault, while
// a fault was active, and in the calm stretches between faults. Before
// starts when the clients were running (History.ClientsRunning), so that
// their start-up does not count as slowness.
type Availability struct {
	Before, During, Between Rate
	// ByKind is the rate while a fault of each kind was active (the
	// windows of one kind merged; an acquisition under two kinds at once
	// counts for both); a kind that hit a majority is apart, with
	// MajoritySuffix.
	ByKind map[string]Rate
}

// Ratio returns the rate during faults as a share of the rate before them,
// or 0 when there was no time before the first fault.
func (a Availability) Ratio() float64 {
	if b := a.Before.PerSecond(); b > 0 {
		return a.During.PerSecond() / b
	}
	return 0
}

// Check checks a history. It can be called while clients are still running;
// it sees what was recorded so far.
func Check(h *History) Report {
	s := h.snapshot()
	r := Report{
		Start:    s.start,
		Failures: make(map[string]map[Kind]int),
		Faults:   make(map[string]int),
	}
	byKey := make(map[string][]Hold)
	for _, hold := range s.holds {
		if hold.Segment == 0 {
			r.Acquisitions++
			if hold.Empty() {
				r.Late++
			}
		}
		byKey[hold.Key] = append(byKey[hold.Key], hold)
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		holds := byKey[key]
		r.Violations = append(r.Violations, overlaps(key, holds, s.start)...)
		checkFences(&r.Fencing, key, holds, s.start)
	}
	if r.Fencing.Checked {
		checkWrites(&r.Fencing, s.holds, s.writes)
	} else {
		r.Fencing.Writes = len(s.writes)
	}
	r.Anomalies = s.anomalies
	for _, f := range s.failures {
		if r.Failures[f.Op] == nil {
			r.Failures[f.Op] = make(map[Kind]int)
		}
		r.Failures[f.Op][f.Kind]++
	}
	for _, f := range s.faults {
		r.Faults[f.Kind]++
	}
	r.Availability = availability(&s)
	return r
}

// overlaps returns every pair of intervals of different locks on one key
// that share some time, but two readers' (Shared); and, for a semaphore's
// permits (Slots), every permit that began while as many others were
// held as the smallest size among them and it (users that disagree on a
// semaphore's size must not make it larger for either). Intervals that
// only touch do not overlap.
func overlaps(key string, holds []Hold, t0 time.Time) []Violation {
	holds = slices.DeleteFunc(slices.Clone(holds), Hold.Empty)
	slices.SortFunc(holds, func(a, b Hold) int { return a.Start.Compare(b.Start) })
	var out []Violation
	var active []Hold
	for _, h := range holds {
		active = slices.DeleteFunc(active, func(a Hold) bool { return !a.End.After(h.Start) })
		permits, size, flagged := 0, h.Slots, false
		for _, a := range active {
			switch {
			case a.Token == h.Token, a.Shared && h.Shared:
			case a.Slots > 0 && h.Slots > 0:
				permits, size = permits+1, min(size, a.Slots)
				if permits >= size && !flagged {
					// h is one more than the semaphore has.
					flagged = true
					out = append(out, Violation{Key: key, A: a, B: h, t0: t0})
				}
			default:
				out = append(out, Violation{Key: key, A: a, B: h, t0: t0})
			}
		}
		active = append(active, h)
	}
	return out
}

// checkFences verifies that fences strictly grow in acquisition order. Only
// locks the client believed it held take part: the moment Obtain returned
// orders those, while a lock that came back already expired may have been
// granted before a lock that returned earlier.
func checkFences(f *Fencing, key string, holds []Hold, t0 time.Time) {
	var locks []Hold
	for _, h := range holds {
		if h.Fence != 0 {
			f.Checked = true
		}
		// A hold whose fence the client could not see (Do hides the
		// lock) takes no part.
		// Readers' fences are not ordered among themselves, and a
		// semaphore's grow per slot: only exclusive holds are ordered.
		if h.Segment == 0 && !h.Empty() && !h.FenceHidden && !h.Shared && h.Slots == 0 {
			locks = append(locks, h)
		}
	}
	if !f.Checked {
		return
	}
	slices.SortFunc(locks, func(a, b Hold) int { return a.Start.Compare(b.Start) })
	for i := 1; i < len(locks); i++ {
		if locks[i].Fence <= locks[i-1].Fence {
			f.OutOfOrder = append(f.OutOfOrder, Violation{Key: key, A: locks[i-1], B: locks[i], t0: t0})
		}
	}
}

// checkWrites verifies the fenced resource's decisions against the holds: a
// write is stale when a lock acquired later than the writer's has already
// had a write accepted, and must be rejected; a write made while its writer
// believed it held the lock must be accepted.
func checkWrites(f *Fencing, holds []Hold, writes []Write) {
	// A token names a lock on one key: the same token may hold other keys
	// (a multi-key lock, or a label such as a leader's term, which may
	// repeat on another key), so both maps are by key and token.
	// A lock that came back already expired takes no part in the order,
	// as in checkFences: it may have been granted before a lock that
	// returned earlier, so the moment it returned says nothing of which
	// holder came later.
	acquired := make(map[holder]time.Time) // → Obtain's return
	segments := make(map[holder][]Hold)
	for _, h := range holds {
		id := holder{h.Key, h.Token}
		if h.Segment == 0 && !h.Empty() {
			acquired[id] = h.Start
		}
		segments[id] = append(segments[id], h)
	}
	writes = slices.Clone(writes)
	slices.SortStableFunc(writes, func(a, b Write) int { return a.At.Compare(b.At) })
	// newest[key] is the latest acquisition among the writers accepted so far.
	newest := make(map[string]time.Time)
	for _, w := range writes {
		f.Writes++
		if !w.Accepted {
			f.Rejected++
		}
		id := holder{w.Key, w.Token}
		mine, known := acquired[id]
		stale := known && newest[w.Key].After(mine)
		believed := slices.ContainsFunc(segments[id], func(h Hold) bool {
			return !w.At.Before(h.Start) && w.At.Before(h.End)
		})
		switch {
		case stale && w.Accepted:
			f.StaleAccepted = append(f.StaleAccepted, w)
		case believed && !w.Accepted:
			f.ValidRejected = append(f.ValidRejected, w)
		}
		if w.Accepted && known && mine.After(newest[w.Key]) {
			newest[w.Key] = mine
		}
	}
}

// holder is a lock on one key: the key and its holder's token.
type holder struct{ key, token string }

// merge sorts windows and merges those that overlap or touch.
func merge(windows [][2]time.Time) [][2]time.Time {
	slices.SortFunc(windows, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	var merged [][2]time.Time
	for _, w := range windows {
		if n := len(merged); n > 0 && !w[0].After(merged[n-1][1]) {
			if w[1].After(merged[n-1][1]) {
				merged[n-1][1] = w[1]
			}
			continue
		}
		merged = append(merged, w)
	}
	return merged
}

// within reports whether t falls in one of the merged windows (ends
// included).
func within(merged [][2]time.Time, t time.Time) bool {
	_, in := slices.BinarySearchFunc(merged, t, func(w [2]time.Time, t time.Time) int {
		switch {
		case w[1].Before(t):
			return -1
		case w[0].After(t):
			return 1
		}
		return 0
	})
	return in
}

// length is the total time of merged windows.
func length(merged [][2]time.Time) time.Duration {
	var d time.Duration
	for _, w := range merged {
		d += w[1].Sub(w[0])
	}
	return d
}

// availability splits the run into the time before the first fault (from
// when the clients were running), the time under at least one fault, and
// the rest; and measures the time under each kind of fault.
func availability(s *History) Availability {
	windows := make([][2]time.Time, 0, len(s.faults))
	byKind := make(map[string][][2]time.Time)
	for _, f := range s.faults {
		w := [2]time.Time{f.Start, f.End}
		windows = append(windows, w)
		k := f.MajorityKind()
		byKind[k] = append(byKind[k], w)
	}
	merged := merge(windows)
	for k, ws := range byKind {
		byKind[k] = merge(ws)
	}
	var a Availability
	begin := s.start
	if !s.running.IsZero() {
		begin = s.running
	}
	firstFault := s.end
	if len(merged) > 0 {
		firstFault = merged[0][0]
	}
	a.Before.Time = max(firstFault.Sub(begin), 0)
	a.During.Time = length(merged)
	a.Between.Time = s.end.Sub(firstFault) - a.During.Time
	if len(byKind) > 0 {
		a.ByKind = make(map[string]Rate, len(byKind))
		for k, ws := range byKind {
			a.ByKind[k] = Rate{Time: length(ws)}
		}
	}
	for _, h := range s.holds {
		if h.Segment != 0 {
			continue
		}
		switch {
		case h.Start.Before(begin):
			// The clients' start-up: no stretch counts it.
		case h.Start.Before(firstFault):
			a.Before.Acquisitions++
		case within(merged, h.Start):
			a.During.Acquisitions++
		default:
			a.Between.Acquisitions++
		}
		for k, ws := range byKind {
			if within(ws, h.Start) {
				r := a.ByKind[k]
				r.Acquisitions++
				a.ByKind[k] = r
			}
		}
	}
	return a
}

// String summarises the report in a few lines; every violation gets its own.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d acquisitions (%d returned already expired), %d violations, %d anomalies, %d faults",
		r.Acquisitions, r.Late, len(r.Violations), len(r.Anomalies), r.FaultCount())
	if len(r.Faults) > 0 {
		b.WriteString(" (")
		for i, k := range slices.Sorted(maps.Keys(r.Faults)) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %d", k, r.Faults[k])
		}
		b.WriteString(")")
	}
	b.WriteString("\n  failures:")
	if len(r.Failures) == 0 {
		b.WriteString(" none")
	}
	for _, op := range slices.Sorted(maps.Keys(r.Failures)) {
		fmt.Fprintf(&b, " %s:", op)
		kinds := r.Failures[op]
		for _, k := range slices.SortedFunc(maps.Keys(kinds), func(a, b Kind) int { return cmp.Compare(a, b) }) {
			fmt.Fprintf(&b, " %s %d;", k, kinds[k])
		}
	}
	a := r.Availability
	fmt.Fprintf(&b, "\n  availability: before faults %v, during faults %v", a.Before, a.During)
	if ratio := a.Ratio(); ratio > 0 {
		fmt.Fprintf(&b, " = %.0f%% of before", 100*ratio)
	}
	fmt.Fprintf(&b, ", between faults %v", a.Between)
	if len(a.ByKind) > 0 {
		b.WriteString("\n  availability by fault:")
		for _, k := range slices.Sorted(maps.Keys(a.ByKind)) {
			fmt.Fprintf(&b, " %s %v", k, a.ByKind[k])
			if before := a.Before.PerSecond(); before > 0 {
				fmt.Fprintf(&b, " = %.0f%%", 100*a.ByKind[k].PerSecond()/before)
			}
			b.WriteString(";")
		}
	}
	f := &r.Fencing
	if f.Checked {
		fmt.Fprintf(&b, "\n  fencing: %d out of order, %d writes (%d rejected), %d stale writes accepted, %d valid writes rejected",
			len(f.OutOfOrder), f.Writes, f.Rejected, len(f.StaleAccepted), len(f.ValidRejected))
	} else {
		b.WriteString("\n  fencing: not checked (every fence was 0)")
	}
	b.WriteString("\n  effects: ")
	b.WriteString(r.Effects.String())
	for _, v := range r.Violations {
		b.WriteString("\n  VIOLATION: ")
		b.WriteString(v.String())
	}
	for _, a := range r.Anomalies {
		fmt.Fprintf(&b, "\n  ANOMALY %s: key %q client %d at %s: %s", a.Kind, a.Key, a.Client, stamp(a.At, r.Start), a.Detail)
	}
	for _, v := range f.OutOfOrder {
		fmt.Fprintf(&b, "\n  FENCE OUT OF ORDER: key %q: %s, then %s", v.Key, describe(v.A, r.Start), describe(v.B, r.Start))
	}
	for _, w := range f.StaleAccepted {
		fmt.Fprintf(&b, "\n  STALE WRITE ACCEPTED: key %q by client %d token %s fence %d at %s", w.Key, w.Client, w.Token, w.Fence, stamp(w.At, r.Start))
	}
	for _, w := range f.ValidRejected {
		fmt.Fprintf(&b, "\n  VALID WRITE REJECTED: key %q by client %d token %s fence %d at %s", w.Key, w.Client, w.Token, w.Fence, stamp(w.At, r.Start))
	}
	return b.String()
}
