package quorum_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/quorum"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("node down")

// script says how each fake node behaves: its vote, and a channel that must
// be closed before it answers (nil answers at once).
type fakeNode struct {
	vote quorum.Vote
	err  error
	wait chan struct{}
}

func run(t *testing.T, nodes []fakeNode, timeout time.Duration, late func(quorum.Reply[int], bool)) (quorum.Result[int], *sync.WaitGroup) {
	t.Helper()
	var bg sync.WaitGroup
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes:   len(nodes),
		Need:    quorum.Majority(len(nodes)),
		Timeout: timeout,
		Call: func(ctx context.Context, i int) (quorum.Vote, int, error) {
			n := nodes[i]
			if n.wait != nil {
				select {
				case <-n.wait:
				case <-ctx.Done():
					return quorum.Failed, i, ctx.Err()
				}
			}
			return n.vote, i, n.err
		},
		Late:       late,
		Background: &bg,
	})
	return res, &bg
}

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4} {
		if got := quorum.Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestRun(t *testing.T) {
	yes := fakeNode{vote: quorum.Yes}
	no := fakeNode{vote: quorum.No}
	down := fakeNode{err: errDown}
	tests := []struct {
		name          string
		nodes         []fakeNode
		ok            bool
		yes, no, fail int
	}{
		{"single node grants", []fakeNode{yes}, true, 1, 0, 0},
		{"single node refuses", []fakeNode{no}, false, 0, 1, 0},
		{"all grant", []fakeNode{yes, yes, yes, yes, yes}, true, 5, 0, 0},
		{"minority down", []fakeNode{down, yes, down, yes, yes}, true, 3, 0, 2},
		{"majority down", []fakeNode{down, yes, down, down, yes}, false, 2, 0, 3},
		{"contention", []fakeNode{no, no, yes, no, yes}, false, 2, 3, 0},
		{"split votes cannot reach quorum", []fakeNode{no, down, yes}, false, 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, bg := run(t, tt.nodes, time.Minute, nil)
			bg.Wait()
			if res.OK != tt.ok {
				t.Fatalf("OK = %v, want %v (%+v)", res.OK, tt.ok, res)
			}
			// Counting may stop early once decided, but never over-counts.
			if res.Yes > tt.yes || res.No > tt.no || res.Failed > tt.fail {
				t.Fatalf("counted yes=%d no=%d failed=%d, at most %d/%d/%d", res.Yes, res.No, res.Failed, tt.yes, tt.no, tt.fail)
			}
			if tt.ok && res.Yes < quorum.Majority(len(tt.nodes)) {
				t.Fatalf("OK with only %d yes", res.Yes)
			}
			for i, r := range res.Replies {
				if r.Node != i {
					t.Fatalf("reply %d has node %d", i, r.Node)
				}
				if r.Vote == quorum.Failed && !errors.Is(r.Err, errDown) {
					t.Fatalf("node %d failed with %v, want errDown", i, r.Err)
				}
			}
		})
	}
}

// A slow node must not hold up a decided round: a majority grants at once,
// and the slow node's late reply is handed to Late with the final outcome.
func TestRunDoesNotWaitForSlowNode(t *testing.T) {
	release := make(chan struct{})
	lates := make(chan quorum.Reply[int], 1)
	nodes := []fakeNode{{vote: quorum.Yes}, {vote: quorum.Yes, wait: release}, {vote: quorum.Yes}}
	res, bg := run(t, nodes, time.Minute, func(r quorum.Reply[int], ok bool) {
		if !ok {
			t.Errorf("late reply saw ok=false for a granted round")
		}
		lates <- r
	})
	if !res.OK || res.Replies[1].Vote != quorum.Pending {
		t.Fatalf("want OK with node 1 pending, got %+v", res)
	}
	close(release)
	if r := <-lates; r.Node != 1 || r.Vote != quorum.Yes {
		t.Fatalf("late reply = %+v", r)
	}
	bg.Wait()
}

// Failure is decided as soon as a majority is out of reach, and a straggler
// that granted after the decision is reported with ok == false so the caller
// can release it.
func TestRunLateStragglerOfFailedRound(t *testing.T) {
	release := make(chan struct{})
	lates := make(chan quorum.Reply[int], 1)
	nodes := []fakeNode{{vote: quorum.No}, {vote: quorum.Yes, wait: release}, {vote: quorum.No}}
	res, bg := run(t, nodes, time.Minute, func(r quorum.Reply[int], ok bool) {
		if ok {
			t.Errorf("late reply saw ok=true for a failed round")
		}
		lates <- r
	})
	if res.OK || res.No != 2 {
		t.Fatalf("want failure on two refusals, got %+v", res)
	}
	close(release)
	if r := <-lates; r.Node != 1 || r.Vote != quorum.Yes {
		t.Fatalf("late reply = %+v", r)
	}
	bg.Wait()
}

// A node that does not answer counts as failed after the timeout; the round
// does not wait for it beyond that, even when the call ignores its context.
func TestRunTimeout(t *testing.T) {
	hung := make(chan struct{})
	lates := make(chan quorum.Reply[int], 1)
	var bg sync.WaitGroup
	start := time.Now()
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes: 3, Need: 2, Timeout: 20 * time.Millisecond,
		Call: func(ctx context.Context, i int) (quorum.Vote, int, error) {
			switch i {
			case 0:
				return quorum.Yes, 0, nil
			case 1:
				<-hung // a client that does not honour its context
				return quorum.Yes, 0, nil
			}
			return quorum.No, 0, nil
		},
		Late:       func(r quorum.Reply[int], ok bool) { lates <- r },
		Background: &bg,
	})
	if res.OK {
		t.Fatalf("want failure, got %+v", res)
	}
	if r := res.Replies[1]; r.Vote != quorum.Failed || !errors.Is(r.Err, quorum.ErrTimeout) {
		t.Fatalf("silent node = %+v, want Failed with ErrTimeout", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("round took %v with a 20ms timeout", d)
	}
	close(hung)
	if r := <-lates; r.Node != 1 || r.Vote != quorum.Yes {
		t.Fatalf("late reply = %+v", r)
	}
	bg.Wait()
}

func TestRunAcceptCanReject(t *testing.T) {
	release := make(chan struct{})
	lates := make(chan bool, 1)
	var bg sync.WaitGroup
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes: 3, Need: 2, Timeout: time.Minute,
		Call: func(ctx context.Context, i int) (quorum.Vote, int, error) {
			if i == 2 {
				<-release
			}
			return quorum.Yes, 0, nil
		},
		Accept:     func(r *quorum.Result[int]) bool { return false },
		Late:       func(r quorum.Reply[int], ok bool) { lates <- ok },
		Background: &bg,
	})
	if res.OK || res.Yes != 2 {
		t.Fatalf("Accept rejected but got %+v", res)
	}
	close(release)
	if ok := <-lates; ok {
		t.Fatal("late reply saw ok=true after Accept rejected")
	}
	bg.Wait()
}

func TestRunCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := quorum.Run(ctx, &quorum.Round[int]{
		Nodes: 3, Need: 2, Timeout: time.Minute,
		Call: func(ctx context.Context, i int) (quorum.Vote, int, error) {
			return quorum.Failed, 0, ctx.Err()
		},
	})
	if res.OK || res.Failed < 2 {
		t.Fatalf("want failure from a cancelled context, got %+v", res)
	}
}

func TestVoteString(t *testing.T) {
	for v, want := range map[quorum.Vote]string{quorum.Pending: "pending", quorum.Yes: "yes", quorum.No: "no", quorum.Failed: "failed", 9: "unknown"} {
		if got := v.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", v, got, want)
		}
	}
}

func TestEachWaitsForAll(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	quorum.Each(t.Context(), 4, time.Minute, nil, func(ctx context.Context, node int) {
		mu.Lock()
		seen[node] = true
		mu.Unlock()
	})
	if len(seen) != 4 {
		t.Fatalf("Each returned after %d of 4 calls", len(seen))
	}
}

// Start mode: calls answer from goroutines the caller owns; a reply that
// comes after the timeout decided the round goes to Late.
func TestRunStart(t *testing.T) {
	var bg sync.WaitGroup
	hold := make(chan struct{})
	lates := make(chan quorum.Reply[int], 1)
	var workers sync.WaitGroup
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes: 3, Need: 2, Timeout: 50 * time.Millisecond,
		Start: func(ctx context.Context, i int, reply func(int, quorum.Vote, int, error)) {
			switch i {
			case 0:
				reply(i, quorum.Yes, 10, nil) // synchronously, inside Start
			case 1:
				workers.Go(func() { <-hold; reply(i, quorum.Yes, 11, nil) })
			default:
				workers.Go(func() { reply(i, quorum.No, 12, nil) })
			}
		},
		Late:       func(r quorum.Reply[int], ok bool) { lates <- r },
		Background: &bg,
	})
	if res.OK || res.Replies[0].Value != 10 || res.Replies[2].Vote != quorum.No {
		t.Fatalf("got %+v", res)
	}
	if r := res.Replies[1]; r.Vote != quorum.Failed || !errors.Is(r.Err, quorum.ErrTimeout) {
		t.Fatalf("silent node = %+v", r)
	}
	close(hold)
	if r := <-lates; r.Node != 1 || r.Value != 11 {
		t.Fatalf("late = %+v", r)
	}
	workers.Wait()
	bg.Wait()
}

// WaitAll waits for every node even once the outcome is known.
func TestRunWaitAll(t *testing.T) {
	release := make(chan struct{})
	go func() { time.Sleep(20 * time.Millisecond); close(release) }()
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes: 3, Need: 2, Timeout: time.Minute, WaitAll: true,
		Call: func(ctx context.Context, i int) (quorum.Vote, int, error) {
			if i == 2 {
				<-release
			}
			return quorum.Yes, i, nil
		},
	})
	if !res.OK || res.Yes != 3 || res.Replies[2].Vote != quorum.Yes {
		t.Fatalf("WaitAll decided before the slow node: %+v", res)
	}
}

// Decided ends a WaitAll round early: here once nodes 0 and 1 have said
// Yes, while node 2 never answers (its Late gets the reply after).
func TestRunWaitAllDecided(t *testing.T) {
	release := make(chan struct{})
	var bg sync.WaitGroup
	calls := 0
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes: 3, Need: 2, Timeout: time.Minute, WaitAll: true, Background: &bg,
		Decided: func(r *quorum.Result[int]) bool {
			calls++
			return r.Replies[0].Vote == quorum.Yes && r.Replies[1].Vote == quorum.Yes
		},
		Call: func(ctx context.Context, i int) (quorum.Vote, int, error) {
			if i == 2 {
				<-release
			}
			return quorum.Yes, i, nil
		},
	})
	close(release)
	bg.Wait()
	if !res.OK || res.Yes != 2 || res.Replies[2].Vote != quorum.Pending || calls == 0 {
		t.Fatalf("Decided did not end the wait for node 2: %+v (Decided called %d times)", res, calls)
	}
}

func TestResultAddCountsVotes(t *testing.T) {
	r := quorum.Result[int]{Replies: make([]quorum.Reply[int], 4)}
	r.Add(quorum.Reply[int]{Node: 0, Vote: quorum.Yes, Value: 7})
	r.Add(quorum.Reply[int]{Node: 1, Vote: quorum.Pending})
	r.Add(quorum.Reply[int]{Node: 2, Vote: quorum.Failed})
	r.Add(quorum.Reply[int]{Node: 3, Vote: quorum.No})
	if r.Yes != 1 || r.No != 1 || r.Failed != 1 || r.Pending() != 1 || r.Replies[0].Value != 7 {
		t.Fatalf("after Add: %+v, pending %d; want one of each vote and 1 pending", r, r.Pending())
	}
}

// A round of more nodes than runState keeps inline counts them all.
func TestRunManyNodes(t *testing.T) {
	nodes := make([]fakeNode, 11)
	for i := range nodes {
		nodes[i] = fakeNode{vote: quorum.Yes}
		if i%3 == 0 {
			nodes[i] = fakeNode{vote: quorum.No}
		}
	}
	res, bg := run(t, nodes, time.Second, nil)
	bg.Wait()
	if !res.OK || len(res.Replies) != 11 || res.Yes < quorum.Majority(11) {
		t.Fatalf("11 nodes, 7 yes: %+v", res)
	}
	for i, r := range res.Replies {
		if r.Node != i {
			t.Fatalf("reply %d is node %d's", i, r.Node)
		}
	}
}

// Every reply given inside Start decides the round before any timer is
// needed; a timeout of zero, which a timer would hit at once, shows none
// ran.
func TestRunDecidedInsideStart(t *testing.T) {
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes: 3, Need: 2, Timeout: 0,
		Start: func(_ context.Context, i int, reply func(int, quorum.Vote, int, error)) {
			reply(i, quorum.Yes, i, nil)
		},
	})
	if !res.OK || res.Yes != 3 || res.Failed != 0 {
		t.Fatalf("got %+v, want three yes votes and no timeout", res)
	}
}

// Timers are reused from round to round: a round after others that timed
// out, or whose timer fired just as their replies decided them, still
// waits its whole timeout. The test binary runs with asynchronous timer
// channels (see the go:debug line in debug_test.go), where a fired timer
// that were reused could deliver its stale tick to the next round.
func TestRunReusedTimersWaitTheirTimeout(t *testing.T) {
	yes := []fakeNode{{vote: quorum.Yes}, {vote: quorum.Yes}, {vote: quorum.Yes}}
	for i := range 300 {
		// The timer and the replies race.
		_, bg := run(t, yes, time.Duration(i%50)*time.Microsecond, nil)
		bg.Wait()
		if res, bg := run(t, yes, time.Minute, nil); !res.OK {
			t.Fatalf("round %d, of three yes votes with a minute's timeout: %+v", i, res)
		} else {
			bg.Wait()
		}
	}
}

// lingerRound runs a round of 3 nodes needing 2, with timeout and linger:
// node 0 answers Yes at once, nodes 1 and 2 answer Yes when answer is
// closed. The test waits for their calls at its end.
func lingerRound(t *testing.T, ctx context.Context, timeout, linger time.Duration, answer <-chan struct{}) quorum.Result[int] {
	var bg sync.WaitGroup
	t.Cleanup(bg.Wait)
	return quorum.Run(ctx, &quorum.Round[int]{
		Nodes:   3,
		Need:    2,
		Timeout: timeout,
		Linger:  linger,
		Start: func(_ context.Context, i int, reply func(int, quorum.Vote, int, error)) {
			if i == 0 {
				reply(i, quorum.Yes, 0, nil)
				return
			}
			go func() {
				<-answer
				reply(i, quorum.Yes, 0, nil)
			}()
		},
		Background: &bg,
	})
}

// closeAfter closes a channel after d, or at the test's end.
func closeAfter(t *testing.T, d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	once := sync.OnceFunc(func() { close(ch) })
	timer := time.AfterFunc(d, once)
	t.Cleanup(func() {
		timer.Stop()
		once()
	})
	return ch
}

func TestRunLingerWaitsPastTimeout(t *testing.T) {
	res := lingerRound(t, t.Context(), 10*time.Millisecond, time.Hour, closeAfter(t, 100*time.Millisecond))
	if !res.OK || res.Yes < 2 {
		t.Fatalf("answers 90ms after the timeout, lingering an hour: ok=%v yes=%d failed=%d, want them counted", res.OK, res.Yes, res.Failed)
	}
}

func TestRunLingerEndsWithCtx(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	answer := make(chan struct{})
	began := time.Now()
	res := lingerRound(t, ctx, 10*time.Millisecond, time.Hour, answer)
	close(answer) // the late answers go nowhere
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("round returned %v after its ctx ended at 50ms", d)
	}
	if res.OK || res.Yes != 1 || res.Failed != 2 {
		t.Fatalf("ctx ended while lingering: ok=%v yes=%d failed=%d, want a failed round with 1 yes and 2 failed", res.OK, res.Yes, res.Failed)
	}
	for _, i := range []int{1, 2} {
		if !errors.Is(res.Replies[i].Err, context.DeadlineExceeded) {
			t.Errorf("node %d: err %v, want context.DeadlineExceeded", i, res.Replies[i].Err)
		}
	}
}

func TestRunEndedCtxStillWaitsTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// Answers after Run has begun to wait, its ctx long ended: within
	// Timeout ctx is not watched.
	res := lingerRound(t, ctx, time.Hour, time.Hour, closeAfter(t, 20*time.Millisecond))
	if !res.OK {
		t.Fatalf("round with an ended ctx, answered within its timeout: ok=%v yes=%d, want it decided by its replies", res.OK, res.Yes)
	}
	// Past Timeout, an ended ctx means no lingering.
	answer := make(chan struct{})
	res = lingerRound(t, ctx, 20*time.Millisecond, time.Hour, answer)
	close(answer)
	if res.OK || res.Failed != 2 || !errors.Is(res.Replies[1].Err, context.Canceled) {
		t.Fatalf("round with an ended ctx at its timeout: ok=%v failed=%d node 1 err %v, want 2 failed with context.Canceled", res.OK, res.Failed, res.Replies[1].Err)
	}
}

// TestRunCountsRepliesAtTheTimeoutOnce races replies against the timeout:
// each reply must count exactly once, in the result or in Late, and a slot
// marked as timed out must not count again.
func TestRunCountsRepliesAtTheTimeoutOnce(t *testing.T) {
	const nodes = 5
	for iter := range 2000 {
		var bg sync.WaitGroup
		var lateMu sync.Mutex
		lates := map[int]bool{}
		res := quorum.Run(t.Context(), &quorum.Round[int]{
			Nodes:   nodes,
			Need:    nodes, // decided only by every node or the timeout
			Timeout: 50 * time.Microsecond,
			Start: func(_ context.Context, i int, reply func(int, quorum.Vote, int, error)) {
				go func() {
					// Spread around the timeout, so some replies come in as
					// the round gives up.
					time.Sleep(time.Duration(iter%7) * 10 * time.Microsecond)
					reply(i, quorum.Yes, 0, nil)
				}()
			},
			Late: func(r quorum.Reply[int], _ bool) {
				lateMu.Lock()
				lates[r.Node] = true
				lateMu.Unlock()
			},
			Background: &bg,
		})
		bg.Wait()
		if got := res.Yes + res.No + res.Failed; got != nodes || res.Pending() != 0 {
			t.Fatalf("iteration %d: yes %d + no %d + failed %d = %d votes, pending %d; want %d votes", iter, res.Yes, res.No, res.Failed, got, res.Pending(), nodes)
		}
		for i, r := range res.Replies {
			timedOut := r.Vote == quorum.Failed
			if timedOut != lates[i] {
				t.Fatalf("iteration %d, node %d: vote %v in the result, late reply %v: want a late reply exactly for a timed-out node", iter, i, r.Vote, lates[i])
			}
		}
	}
}

// With Call, the calls' ctx lasts the Linger too: calls that answer after
// the Timeout, within the Linger, are counted.
func TestRunLingerKeepsCallsAlive(t *testing.T) {
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes:   3,
		Need:    2,
		Timeout: 10 * time.Millisecond,
		Linger:  time.Hour,
		Call: func(ctx context.Context, i int) (quorum.Vote, int, error) {
			select {
			case <-time.After(50 * time.Millisecond):
				return quorum.Yes, i, nil
			case <-ctx.Done():
				return quorum.Failed, i, ctx.Err()
			}
		},
	})
	if !res.OK {
		t.Fatalf("calls answering 40ms after the timeout, lingering an hour: ok=%v yes=%d failed=%d (%v), want them counted", res.OK, res.Yes, res.Failed, res.Replies[0].Err)
	}
}

// classifyRound runs a round of three nodes with Classify as given: node 0
// fails and node 1 refuses at once, node 2 refuses after a while, or never
// answers when slow is nil.
func classifyRound(t *testing.T, classify bool, slow *time.Duration, timeout time.Duration) quorum.Result[int] {
	t.Helper()
	var bg sync.WaitGroup
	t.Cleanup(bg.Wait)
	// A node that never answers in the round answers when the test ends.
	end := make(chan struct{})
	t.Cleanup(func() { close(end) })
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes:    3,
		Need:     2,
		Timeout:  timeout,
		Classify: classify,
		Start: func(_ context.Context, i int, reply func(int, quorum.Vote, int, error)) {
			switch {
			case i == 0:
				reply(i, quorum.Failed, 0, errDown)
			case i == 1:
				reply(i, quorum.No, 0, nil)
			case slow != nil:
				// A node slower than the others to refuse.
				time.AfterFunc(*slow, func() { reply(i, quorum.No, 0, nil) })
			default:
				go func() {
					<-end
					reply(i, quorum.No, 0, nil)
				}()
			}
		},
		Background: &bg,
	})
	return res
}

// With one node failed and one refusing, whether the round is lost to
// refusal or to failure depends on the third: Classify waits for it.
func TestRunClassifyWaitsForTheDecidingNo(t *testing.T) {
	slow := 50 * time.Millisecond
	res := classifyRound(t, true, &slow, 10*time.Second)
	if res.OK || res.No != 2 || res.Failed != 1 {
		t.Fatalf("with Classify: ok %v, %d no, %d failed, %d pending; want the late No counted (2 no, 1 failed)",
			res.OK, res.No, res.Failed, res.Pending())
	}
	res = classifyRound(t, false, &slow, 10*time.Second)
	if res.OK || res.No != 1 || res.Pending() != 1 {
		t.Fatalf("without Classify: ok %v, %d no, %d pending; want the round decided without the third node",
			res.OK, res.No, res.Pending())
	}
}

// Classify waits no longer than the timeout for a node that never answers,
// which then counts as failed.
func TestRunClassifyEndsAtTimeout(t *testing.T) {
	res := classifyRound(t, true, nil, 50*time.Millisecond)
	if res.OK || res.No != 1 || res.Failed != 2 || !errors.Is(res.Replies[2].Err, quorum.ErrTimeout) {
		t.Fatalf("ok %v, %d no, %d failed, node 2 %v; want node 2 failed with ErrTimeout", res.OK, res.No, res.Failed, res.Replies[2].Err)
	}
}

// A round that refusals alone have lost is decided at once, Classify or
// not: the silent node could change nothing.
func TestRunClassifyDoesNotWaitWhenDecided(t *testing.T) {
	var bg sync.WaitGroup
	defer bg.Wait()
	hang := make(chan struct{})
	defer close(hang)
	begin := time.Now()
	res := quorum.Run(t.Context(), &quorum.Round[int]{
		Nodes: 3, Need: 2, Timeout: 10 * time.Second, Classify: true,
		Call: func(ctx context.Context, i int) (quorum.Vote, int, error) {
			if i == 2 {
				select {
				case <-hang:
				case <-ctx.Done():
				}
				return quorum.Failed, 0, errDown
			}
			return quorum.No, 0, nil
		},
		Background: &bg,
	})
	if res.No != 2 || res.Pending() != 1 {
		t.Fatalf("%d no, %d pending; want 2 no and the silent node not waited for", res.No, res.Pending())
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("decided after %v; want at once", d)
	}
}
