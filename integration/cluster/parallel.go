package cluster

import (
	"errors"
	"sync"

	"github.com/quorumlock/redlock/internal/redistest"
)

// inParallel runs f(0) ... f(n-1) at once, waits for them, and returns
// their errors joined.
func inParallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// wake starts s again if it was stopped, or continues it if it was
// paused (SIGCONT does nothing to a running process).
func wake(s *redistest.Server) error {
	if !s.Running() {
		return s.Restart()
	}
	return s.Resume()
}

// closeEach closes every deployment of all that was started (nil: never
// started), and returns their errors joined.
func closeEach[T any, P interface {
	*T
	Close() error
}](all []P) error {
	var errs []error
	for _, d := range all {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	return errors.Join(errs...)
}
