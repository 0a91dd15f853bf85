package redlock

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/quorumlock/redlock/quorum"
)

// Without an observer the hooks on the lock's paths build nothing and
// allocate nothing.
func TestNoObserverAllocatesNothing(t *testing.T) {
	var o *observer
	ctx := context.Background()
	k := &Lock{key: "k"}
	err := errors.New("e")
	keepers, keys, which, errs := []*keeper{{k: k, ctx: ctx}}, []string{"k"}, []int{0}, []error{err}
	allocs := testing.AllocsPerRun(1000, func() {
		c, tr := o.begin(ctx, OpObtain, "k")
		began := tr.now()
		tr.attempted(began)
		tr.waited(c, began)
		tr.obtained(c, k, err)
		tr.released(c, k, err)
		tr.done(c, err)
		o.lost(c, k, err)
		_ = o.now()
		// A shared extension round's trace is nil, and does nothing.
		bt := o.beginExtends(nil, keepers)
		bt.node(0, bt.now(), keys, which, "1", nil)
		bt.done(errs)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per operation without an observer, want 0", allocs)
	}
	if bt := o.beginExtends(nil, keepers); bt != nil {
		t.Error("beginExtends built a trace without an observer")
	}
	if got := o.now(); !got.IsZero() {
		t.Errorf("now without an observer read the clock: %v", got)
	}
	// The rounds' Start is the sender itself: no wrapper per node.
	l := &Locker{}
	var start startFunc[int64] = func(context.Context, int, func(int, quorum.Vote, int64, error)) {}
	if got := l.observeNodes(OpObtain, "k", start); reflect.ValueOf(got).Pointer() != reflect.ValueOf(start).Pointer() {
		t.Error("observeNodes wrapped a round's Start without an observer")
	}
}
