package lockers

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// RueidisKeyPrefix is the one key prefix rueidislock's keys get:
// "<prefix>:0:<name>" (the ":0" is the index of the key among its
// KeyMajority*2-1 keys, one here).
const RueidisKeyPrefix = "redlock-bench-rueidislock"

// rueidisImpl is rueidis's rueidislock on one node, set up as its README
// advises for one Redis instance (KeyMajority 1, NOLOOP tracking on Redis
// 7.0.5 and later), with the TTL every mode uses as its key validity. It
// brings its own client (rueidis, RESP3 with client-side caching, which
// wakes waiters when the holder's key changes), dialled to the same
// address as the go-redis client it is given, without command retries
// like the others.
//
// Its semantics differ from the other libraries': the lock is a context,
// extended in the background every KeyValidity/2 and cancelled when the
// key is lost; the key's expiry is the context's deadline when that comes
// sooner than KeyValidity; releasing (the returned cancel) waits for the
// delete.
type rueidisImpl struct{ l rueidislock.Locker }

func newRueidis(c redis.UniversalClient) (*rueidisImpl, error) {
	rc, ok := c.(*redis.Client)
	if !ok {
		return nil, fmt.Errorf("lockers: %s needs a single-server client, not %T", Rueidislock, c)
	}
	o := rc.Options()
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{
			InitAddress:  []string{o.Addr},
			Username:     o.Username,
			Password:     o.Password,
			DisableRetry: true,
		},
		KeyPrefix:      RueidisKeyPrefix,
		KeyValidity:    TTL,
		KeyMajority:    1,
		NoLoopTracking: true,
	})
	if err != nil {
		return nil, fmt.Errorf("lockers: %s: %w", Rueidislock, err)
	}
	return &rueidisImpl{l}, nil
}

func (r *rueidisImpl) NewWorker() Worker { return &rueidisWorker{l: r.l} }

func (r *rueidisImpl) Close() error {
	r.l.Close()
	return nil
}

type rueidisWorker struct {
	l       rueidislock.Locker
	release context.CancelFunc
}

// Lock with wait blocks until the lock is free (woken by the key's
// invalidation) or ctx ends; rueidislock has no retry limit of its own.
func (w *rueidisWorker) Lock(ctx context.Context, key string, wait bool) error {
	var err error
	if wait {
		_, w.release, err = w.l.WithContext(ctx, key)
	} else {
		_, w.release, err = w.l.TryWithContext(ctx, key)
	}
	if err != nil {
		w.release = nil
	}
	return err
}

// Unlock cancels the lock's context, which deletes the key and returns once
// the delete is done. rueidislock reports no error for it.
func (w *rueidisWorker) Unlock(context.Context) error {
	if w.release == nil {
		return errNotLocked
	}
	w.release()
	w.release = nil
	return nil
}
