package redlock

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryStrategy says how Obtain waits between attempts; every Obtain starts
// its own Sequence, so strategies may be shared. Bad parameters fail New,
// or the call given the strategy, with ErrInvalid.
type RetryStrategy interface {
	Start() Sequence // a fresh sequence of waits for one Obtain call
}

// Sequence is the state of a RetryStrategy within one Obtain call.
type Sequence interface {
	Next() (time.Duration, bool) // the wait before the next attempt, or false to stop
}

// validator is implemented by strategies whose parameters can be wrong.
type validator interface{ validate() error }

// NoRetry makes Obtain try exactly once, like TryObtain.
func NoRetry() RetryStrategy { return noRetry{} }

type noRetry struct{}

func (noRetry) Start() Sequence             { return noRetry{} }
func (noRetry) Next() (time.Duration, bool) { return 0, false }

// LinearBackoff retries every d (d > 0), jittered within [d/2, 3d/2), until
// the context ends.
func LinearBackoff(d time.Duration) RetryStrategy { return linear{d} }

type linear struct{ d time.Duration }

func (s linear) Start() Sequence { return s }
func (s linear) Next() (time.Duration, bool) {
	return s.d/2 + rand.N(s.d), true
}
func (s linear) validate() error {
	if s.d <= 0 {
		return invalid("LinearBackoff interval %v must be positive", s.d)
	}
	return nil
}

// ExponentialBackoff retries with steps that double from min to max
// (0 < min <= max), each wait drawn from [step/2, step], until the context
// ends.
func ExponentialBackoff(min, max time.Duration) RetryStrategy { return exponential{min, max} }

type exponential struct{ min, max time.Duration }

func (s exponential) Start() Sequence { return &exponentialSeq{s: s, step: s.min} }
func (s exponential) validate() error {
	if s.min <= 0 || s.max < s.min {
		return invalid("ExponentialBackoff(%v, %v) needs 0 < min <= max", s.min, s.max)
	}
	return nil
}

type exponentialSeq struct {
	s    exponential
	step time.Duration
}

func (q *exponentialSeq) Next() (time.Duration, bool) {
	step := q.step
	if q.step < q.s.max {
		q.step = min(2*q.step, q.s.max)
	}
	return step/2 + rand.N(step/2+1), true
}

// LimitRetry stops s after n retries (n >= 0; n+1 attempts in all).
func LimitRetry(s RetryStrategy, n int) RetryStrategy { return limit{s, n} }

type limit struct {
	s RetryStrategy
	n int
}

func (l limit) Start() Sequence {
	if l.s == nil {
		return noRetry{}
	}
	return &limitSeq{seq: l.s.Start(), left: l.n}
}
func (l limit) validate() error {
	if l.s == nil {
		return invalid("LimitRetry needs a strategy")
	}
	if l.n < 0 {
		return invalid("LimitRetry count %d must not be negative", l.n)
	}
	return validateStrategy(l.s)
}

type limitSeq struct {
	seq  Sequence
	left int
}

func (q *limitSeq) Next() (time.Duration, bool) {
	if q.left <= 0 {
		return 0, false
	}
	q.left--
	return q.seq.Next()
}

func validateStrategy(s RetryStrategy) error {
	if s == nil {
		return invalid("nil RetryStrategy")
	}
	if v, ok := s.(validator); ok {
		if err := v.validate(); err != nil {
			return fmt.Errorf("retry strategy: %w", err)
		}
	}
	return nil
}
