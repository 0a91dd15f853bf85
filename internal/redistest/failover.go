package redistest

import (
	"context"
	"fmt"
)

// FailoverMode is how a replica takes over its master (CLUSTER FAILOVER).
type FailoverMode string

const (
	// FailoverCoordinated: the master stops its clients, the replica
	// catches up with it, and takes over with the votes of the masters:
	// nothing acknowledged is lost. The master must answer.
	FailoverCoordinated FailoverMode = ""
	// FailoverForce: the replica takes over with the masters' votes at
	// once, without its master: writes it had not received are lost.
	FailoverForce FailoverMode = "FORCE"
	// FailoverTakeover: the replica takes over alone, without any vote,
	// with a new epoch of its own.
	FailoverTakeover FailoverMode = "TAKEOVER"
)

// Failover has replica take over its master's slots (CLUSTER FAILOVER
// with mode) and waits until every answering node sees it as the master of
// those slots and says cluster_state:ok (AwaitReady waits, besides, until
// every node knows every role). It returns the old master, which
// turns into a replica of the new one once it learns of the change (at
// once if it answers; when it runs again otherwise).
func (c *Cluster) Failover(ctx context.Context, replica *ClusterNode, mode FailoverMode) (old *ClusterNode, err error) {
	tp, err := c.Topology(ctx)
	if err != nil {
		return nil, err
	}
	old = tp.MasterOf[replica]
	if old == nil {
		return nil, fmt.Errorf("redistest: %s is not a replica", replica.Addr)
	}
	var slots []int
	for s, o := range tp.Owner {
		if o == old {
			slots = append(slots, s)
		}
	}
	args := []any{"CLUSTER", "FAILOVER"}
	if mode != FailoverCoordinated {
		args = append(args, string(mode))
	}
	cl := replica.NewClient()
	err = cl.Do(ctx, args...).Err()
	_ = cl.Close()
	if err != nil {
		return nil, fmt.Errorf("redistest: CLUSTER FAILOVER %s on %s: %w", mode, replica.Addr, err)
	}
	err = c.await(ctx, "replica "+replica.Addr+" is master", func(v []view) error {
		if err := agreed(v, true, true); err != nil {
			return err
		}
		tp, err := c.topology(v[0])
		if err != nil {
			return err
		}
		for _, s := range slots {
			if tp.Owner[s] != replica {
				return fmt.Errorf("slot %d is still %s's", s, tp.Owner[s].Addr)
			}
		}
		if role, err := replica.Role(ctx); err != nil || role != "master" {
			return fmt.Errorf("%s's role is %q (%v)", replica.Addr, role, err)
		}
		return nil
	})
	return old, err
}
