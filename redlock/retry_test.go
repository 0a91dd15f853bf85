package redlock_test

import (
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

func TestNoRetry(t *testing.T) {
	if _, ok := redlock.NoRetry().Start().Next(); ok {
		t.Fatal("NoRetry retried")
	}
}

func TestLinearBackoffJitter(t *testing.T) {
	d := 100 * time.Millisecond
	seq := redlock.LinearBackoff(d).Start()
	seen := map[time.Duration]bool{}
	for range 200 {
		w, ok := seq.Next()
		if !ok || w < d/2 || w >= 3*d/2 {
			t.Fatalf("Next() = %v, %v; want a wait in [%v, %v)", w, ok, d/2, 3*d/2)
		}
		seen[w] = true
	}
	if len(seen) < 50 {
		t.Fatalf("only %d distinct waits in 200: no jitter", len(seen))
	}
}

func TestExponentialBackoff(t *testing.T) {
	lo, hi := 10*time.Millisecond, 80*time.Millisecond
	seq := redlock.ExponentialBackoff(lo, hi).Start()
	step := lo
	for i := range 10 {
		w, ok := seq.Next()
		if !ok || w < step/2 || w > step {
			t.Fatalf("wait %d = %v, want in [%v, %v]", i, w, step/2, step)
		}
		step = min(2*step, hi)
	}
}

// Each Obtain call starts its own sequence: one call's backoff never
// leaks into another's.
func TestRetrySequencesAreIndependent(t *testing.T) {
	s := redlock.ExponentialBackoff(10*time.Millisecond, time.Second)
	a := s.Start()
	for range 6 {
		a.Next()
	}
	if w, _ := s.Start().Next(); w > 10*time.Millisecond {
		t.Fatalf("a fresh sequence starts at %v: state is shared", w)
	}
	limited := redlock.LimitRetry(redlock.LinearBackoff(time.Millisecond), 2)
	for range 2 {
		seq := limited.Start()
		for i := range 3 {
			_, ok := seq.Next()
			if want := i < 2; ok != want {
				t.Fatalf("retry %d: ok = %v, want %v", i, ok, want)
			}
		}
	}
}
