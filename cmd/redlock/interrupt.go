package main

import (
	"context"
	"os"
)

// interruptible runs get (taking a lock, campaigning) while watching sigs:
// the first signal calls cancel, which must make get return soon. It returns
// what get returned, with the signal if one came. get may have succeeded even
// so (the signal came as it returned): the caller then gives back what it got.
func interruptible[T any](sigs <-chan os.Signal, cancel context.CancelFunc, get func() (T, error)) (T, os.Signal, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := get()
		done <- result{v, err}
	}()
	var sig os.Signal
	for {
		select {
		case s := <-sigs:
			if sig == nil {
				sig = s
				cancel()
			}
		case r := <-done:
			return r.v, sig, r.err
		}
	}
}
