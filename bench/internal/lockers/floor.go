package lockers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// floorImpl is no lock at all: the least any quorum lock must do over the
// same nodes, so that every table shows how far each library is from what
// the servers allow. An Obtain+Release pair is two rounds of PING: each
// round sends one PING to every node, one goroutine per node, and returns
// once a majority has answered (with one node: one PING, in the caller's
// goroutine, as a single-node lock needs no fan-out).
type floorImpl struct {
	clients []redis.UniversalClient
	// stragglers are the PINGs still in flight after their round was
	// decided; Close waits for them, so no goroutine outlives the Impl.
	stragglers sync.WaitGroup
}

func (f *floorImpl) NewWorker() Worker { return &floorWorker{f: f} }

func (f *floorImpl) Close() error {
	f.stragglers.Wait()
	return nil
}

type floorWorker struct {
	f    *floorImpl
	held bool
}

// Lock is the first round; wait changes nothing, as nobody ever holds
// anything.
func (w *floorWorker) Lock(ctx context.Context, _ string, _ bool) error {
	if err := w.f.round(ctx); err != nil {
		return err
	}
	w.held = true
	return nil
}

// Unlock is the second round.
func (w *floorWorker) Unlock(ctx context.Context) error {
	if !w.held {
		return errNotLocked
	}
	w.held = false
	return w.f.round(ctx)
}

// round PINGs every node and returns when a majority has answered, or with
// an error as soon as a majority can no longer answer. The PINGs end with
// ctx (the harness's window has a deadline), not with the round: a lock's
// late replies must be read too.
func (f *floorImpl) round(ctx context.Context) error {
	n := len(f.clients)
	if n == 1 {
		return f.clients[0].Ping(ctx).Err()
	}
	// Buffered to the number of senders, so an early return strands none.
	results := make(chan error, n)
	f.stragglers.Add(n)
	for _, c := range f.clients {
		go func() {
			defer f.stragglers.Done()
			results <- c.Ping(ctx).Err()
		}()
	}
	need := n/2 + 1
	var ok int
	var errs []error
	for ok < need {
		err := <-results
		if err == nil {
			ok++
			continue
		}
		if errs = append(errs, err); len(errs) > n-need {
			return fmt.Errorf("floor: no majority of %d nodes: %w", n, errors.Join(errs...))
		}
	}
	return nil
}
