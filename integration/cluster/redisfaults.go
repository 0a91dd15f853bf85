package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// The faults of a Redis Cluster node of the quorum. Each acts on the shard
// (master and replica) that owns the slot of one of the run's lock keys in
// cluster i, and says what it did. wait, where given, is the fault's
// duration: the nemesis sleeps there, until its run ends at the latest.

// Reshard moves the slot of key in cluster i to another master, step by
// step as redis-cli does (redistest's MigrateSlot), calling after at each
// step: the slot's keys (a lock, its fencing counter, the restart guard's
// marker) go with it, and clients are redirected meanwhile.
func (rc *RedisClusters) Reshard(ctx context.Context, i int, key string, after func(redistest.MigrationStep) error) (string, error) {
	c := rc.Clusters[i]
	from, slot, err := rc.keyShard(ctx, i, key)
	if err != nil {
		return "", err
	}
	tp, err := c.Topology(ctx)
	if err != nil {
		return "", err
	}
	to, err := otherMaster(tp, from)
	if err != nil {
		return "", err
	}
	if err := c.MigrateSlot(ctx, slot, to, after); err != nil {
		return "", err
	}
	return fmt.Sprintf("slot %d from %s to %s", slot, from.Addr, to.Addr), nil
}

// Failover has the replica of the master of key's slot in cluster i take
// over with its master's consent (CLUSTER FAILOVER): the master stops its
// clients until the replica has every write it acknowledged, so nothing
// is lost. The old master turns replica of the new one.
func (rc *RedisClusters) Failover(ctx context.Context, i int, key string) (string, error) {
	c := rc.Clusters[i]
	master, replica, err := rc.keyReplica(ctx, i, key)
	if err != nil {
		return "", err
	}
	if err := failover(ctx, c, master, replica, redistest.FailoverCoordinated); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s took over from %s", replica.Addr, master.Addr), nil
}

// FailoverLosingWrites plays a master that dies while its replica lags:
// the replica is stopped (SIGSTOP) and its link to the master cut (CLIENT
// KILL TYPE replica); the master goes on acknowledging writes for wait,
// which the replica never receives; then the master is killed, the
// replica continues and takes over without it (CLUSTER FAILOVER FORCE),
// and the old master starts again, empty, as its replica. The writes of
// the wait are lost: locks, fencing counters, and whatever the replica had
// not received before.
func (rc *RedisClusters) FailoverLosingWrites(ctx context.Context, i int, key string, wait func()) (string, error) {
	c := rc.Clusters[i]
	master, replica, err := rc.keyReplica(ctx, i, key)
	if err != nil {
		return "", err
	}
	if err := replica.Pause(); err != nil {
		return "", err
	}
	cl := master.NewClient()
	err = cl.ClientKillByFilter(ctx, "TYPE", "replica").Err()
	err = errors.Join(err, cl.Close())
	if err == nil {
		wait()
		err = master.Kill()
	}
	// Whatever failed, the replica must run again.
	if rerr := replica.Resume(); rerr != nil || err != nil {
		return "", errors.Join(err, rerr)
	}
	err = failover(ctx, c, master, replica, redistest.FailoverForce)
	if rerr := master.Restart(); rerr != nil || err != nil {
		return "", errors.Join(err, rerr)
	}
	return fmt.Sprintf("%s took over from %s, which lost its writes", replica.Addr, master.Addr), nil
}

// KillShard kills the master of key's slot in cluster i (SIGKILL), waits,
// and starts it again on its ports and directory: it keeps its slots and
// its cluster ID, and comes back empty (no persistence). Its replica,
// which the cluster does not promote within the node timeout (5s), then
// empties itself too when it synchronises again.
func (rc *RedisClusters) KillShard(ctx context.Context, i int, key string, wait func()) (string, error) {
	master, _, err := rc.keyShard(ctx, i, key)
	if err != nil {
		return "", err
	}
	if err := master.Kill(); err != nil {
		return "", err
	}
	wait()
	if err := master.Restart(); err != nil {
		return "", err
	}
	return "master " + master.Addr, nil
}

// keyReplica returns the master of key's slot in cluster i and its first
// replica.
func (rc *RedisClusters) keyReplica(ctx context.Context, i int, key string) (master, replica *redistest.ClusterNode, err error) {
	master, _, err = rc.keyShard(ctx, i, key)
	if err != nil {
		return nil, nil, err
	}
	tp, err := rc.Clusters[i].Topology(ctx)
	if err != nil {
		return nil, nil, err
	}
	rs := tp.Replicas(master)
	if len(rs) == 0 {
		return nil, nil, fmt.Errorf("master %s has no replica", master.Addr)
	}
	return master, rs[0], nil
}

// failover has replica take over in mode (redistest's Failover). A
// replica whose failover needs the masters' votes (coordinated, FORCE) was
// seen now and then never to take over within 7 seconds when its shard
// had failed over shortly before (Redis keeps a master from voting for a
// replica of the same master within two node timeouts): it then takes
// over without votes (TAKEOVER), with its master's writes paused first in
// a coordinated failover, so that nothing is lost either way.
func failover(ctx context.Context, c *redistest.Cluster, master, replica *redistest.ClusterNode, mode redistest.FailoverMode) error {
	if mode == redistest.FailoverCoordinated {
		if err := awaitLinkUp(ctx, replica); err != nil {
			return err
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 7*time.Second)
	_, err := c.Failover(fctx, replica, mode)
	cancel()
	if err == nil || ctx.Err() != nil {
		return err
	}
	if role, rerr := replica.Role(ctx); rerr == nil && role == "master" {
		// It took over just too late.
		return c.AwaitReady(ctx)
	}
	if mode != redistest.FailoverCoordinated {
		_, err = c.Failover(ctx, replica, redistest.FailoverTakeover)
		return err
	}
	return takeoverPaused(ctx, c, master, replica)
}

// takeoverPaused is a coordinated failover by hand: master's writes are
// paused (CLIENT PAUSE WRITE), the replica catches up with it, takes over
// (TAKEOVER), and every answering node, master included, agrees before the
// writes resume, which master then redirects.
func takeoverPaused(ctx context.Context, c *redistest.Cluster, master, replica *redistest.ClusterNode) (err error) {
	mc := master.NewClient()
	defer mc.Close()
	if err := mc.Do(ctx, "CLIENT", "PAUSE", 10_000, "WRITE").Err(); err != nil {
		return fmt.Errorf("CLIENT PAUSE on %s: %w", master.Addr, err)
	}
	defer func() { err = errors.Join(err, mc.Do(context.WithoutCancel(ctx), "CLIENT", "UNPAUSE").Err()) }()
	if err := awaitLinkUp(ctx, replica); err != nil {
		return err
	}
	want, err := replOffset(ctx, mc, "master_repl_offset:")
	if err != nil {
		return err
	}
	rc := replica.NewClient()
	defer rc.Close()
	for {
		got, err := replOffset(ctx, rc, "slave_repl_offset:")
		if err != nil {
			return err
		}
		if got >= want {
			break
		}
		time.Sleep(5 * time.Millisecond) // a replica gives no signal when it catches up
	}
	_, err = c.Failover(ctx, replica, redistest.FailoverTakeover)
	return err
}

// replOffset returns the replication offset field of INFO replication.
func replOffset(ctx context.Context, cl *redis.Client, field string) (int64, error) {
	info, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in INFO replication", strings.TrimSuffix(field, ":"))
}

// awaitLinkUp waits, up to ten seconds, until replica is synchronised with
// its master and its link is up (INFO replication).
func awaitLinkUp(ctx context.Context, replica *redistest.ClusterNode) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl := replica.NewClient()
	defer cl.Close()
	// A replica gives no signal when its link comes up; asking is the
	// only way to know.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := cl.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s: link to its master not up: %w (last error: %v)", replica.Addr, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
