package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// A context that has ended before the call obtains nothing: TryObtain,
// Obtain and Do return its error, Do does not run fn, and no node gets a
// key (the node calls run on their own deadlines, so a round started
// anyway would take the lock).
func TestEndedContextObtainsNothing(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	ended := []struct {
		name string
		ctx  func() context.Context
		want error
	}{
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}, context.Canceled},
		{"past its deadline", func() context.Context {
			ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, context.DeadlineExceeded},
	}
	calls := []struct {
		name string
		call func(ctx context.Context, key string) (*redlock.Lock, error)
	}{
		{"TryObtain", func(ctx context.Context, key string) (*redlock.Lock, error) { return l.TryObtain(ctx, key) }},
		{"Obtain", func(ctx context.Context, key string) (*redlock.Lock, error) { return l.Obtain(ctx, key) }},
		{"Do", func(ctx context.Context, key string) (*redlock.Lock, error) {
			err := l.Do(ctx, key, func(context.Context) error {
				t.Error("Do ran fn with an ended context")
				return nil
			})
			return nil, err
		}},
	}
	for _, e := range ended {
		for _, call := range calls {
			t.Run(e.name+"/"+call.name, func(t *testing.T) {
				key := t.Name()
				lock, err := call.call(e.ctx(), key)
				if lock != nil {
					t.Fatalf("obtained a lock (until %v) with a context that had ended", lock.Until())
				}
				if !errors.Is(err, e.want) {
					t.Fatalf("error %v, want one matching %v", err, e.want)
				}
				for i, v := range c.values(t, key) {
					if v != "" {
						t.Errorf("node %d has a key after a call with an ended context: %q", i, v)
					}
				}
			})
		}
	}
}
