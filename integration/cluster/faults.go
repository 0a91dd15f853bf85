package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// The data faults: a node that forgets or refuses what it granted without
// a network fault. Each one is a way Redis really loses keys: an old RDB
// snapshot reloaded, the unsynced tail of an everysec append-only file lost
// in a crash, a lagging replica promoted, eviction under maxmemory, a flush,
// a wall clock that jumps or runs fast, a master turned replica.

// ErrUnsupported means the backend cannot inject the fault (a container
// has no clock shim and no data directory this process can reach).
var ErrUnsupported = errors.New("fault not supported by this backend")

// direct runs f with a client connected to the node's server itself, not
// through the proxy, so the nemesis reaches it whatever the proxy does.
func (n *Node) direct(ctx context.Context, f func(*redis.Client) error) error {
	rc := NewClient(n.Server().Addr())
	return errors.Join(f(rc), rc.Close())
}

// Snapshot saves an RDB snapshot (SAVE) now: a later restart (the
// restart-rdb fault) reloads it and forgets every lock granted since.
func (n *Node) Snapshot(ctx context.Context) error {
	return n.direct(ctx, func(rc *redis.Client) error { return rc.Save(ctx).Err() })
}

// Flush empties the server (FLUSHALL), restart guard marker and fencing
// counters included.
func (n *Node) Flush(ctx context.Context) error {
	return n.direct(ctx, func(rc *redis.Client) error { return rc.FlushAll(ctx).Err() })
}

// fillerValue is the size of one filler key.
const fillerValue = 16 << 10

// Fill sets the eviction policy (a volatile-* one) and writes filler keys
// with a TTL until twice maxmemory has been written, so that the server
// evicts keys with a TTL, lock keys among them. It fails when the server
// has no maxmemory (Options.MaxMemory).
func (n *Node) Fill(ctx context.Context, policy string) error {
	return n.direct(ctx, func(rc *redis.Client) error {
		cfg, err := rc.ConfigGet(ctx, "maxmemory").Result()
		if err != nil {
			return err
		}
		limit, _ := strconv.ParseInt(cfg["maxmemory"], 10, 64)
		if limit <= 0 {
			return errors.New("fill: the server has no maxmemory (cluster Options.MaxMemory)")
		}
		if err := rc.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			return fmt.Errorf("fill: policy %s: %w", policy, err)
		}
		value := strings.Repeat("x", fillerValue)
		count := int(2 * limit / fillerValue)
		n.mu.Lock()
		n.filled = max(n.filled, count)
		n.mu.Unlock()
		for i := 0; i < count; i += 64 {
			pipe := rc.Pipeline()
			for j := i; j < min(i+64, count); j++ {
				pipe.Set(ctx, "chaos-filler:"+strconv.Itoa(j), value, time.Minute)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("fill: %w", err)
			}
		}
		return nil
	})
}

// unfill deletes the filler keys and sets the eviction policy back to
// noeviction.
func (n *Node) unfill(ctx context.Context, count int) error {
	return n.direct(ctx, func(rc *redis.Client) error {
		if err := rc.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
			return err
		}
		for i := 0; i < count; i += 256 {
			keys := make([]string, 0, 256)
			for j := i; j < min(i+256, count); j++ {
				keys = append(keys, "chaos-filler:"+strconv.Itoa(j))
			}
			if err := rc.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadOnly turns the server into a replica of an address where nothing
// listens: it keeps its keys but refuses writes (READONLY) until Writable.
func (n *Node) ReadOnly(ctx context.Context) error {
	port, err := redistest.FreePort()
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.readonly = true
	n.mu.Unlock()
	return n.direct(ctx, func(rc *redis.Client) error {
		return rc.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(port)).Err()
	})
}

// Writable undoes ReadOnly (REPLICAOF NO ONE).
func (n *Node) Writable(ctx context.Context) error {
	err := n.direct(ctx, func(rc *redis.Client) error { return rc.ReplicaOf(ctx, "NO", "ONE").Err() })
	if err == nil {
		n.mu.Lock()
		n.readonly = false
		n.mu.Unlock()
	}
	return err
}

// aofMark is the length of the append-only file at a moment the nemesis
// takes as the last fsync.
type aofMark struct {
	file string
	size int64
}

// dirServer is a server whose data directory this process can reach.
type dirServer interface{ Dir() string }

// MarkSynced records the append-only file's length now, as the moment of
// its last fsync (appendfsync everysec fsyncs once a second).
func (n *Node) MarkSynced(_ context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	ds, ok := n.server.(dirServer)
	if !ok {
		return fmt.Errorf("restart-everysec: %w", ErrUnsupported)
	}
	file, err := currentAOF(ds.Dir())
	if err != nil {
		return err
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	n.synced = aofMark{file: file, size: st.Size()}
	return nil
}

// CrashLosingUnsynced kills the server (SIGKILL), cuts its append-only file
// back to the length MarkSynced recorded, and starts it again: what a
// machine crash does under appendfsync everysec. A killed process alone
// loses nothing, since its writes sit in the kernel's page cache.
func (n *Node) CrashLosingUnsynced(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	mark := n.synced
	n.synced = aofMark{}
	if err := n.killLocked(ctx); err != nil {
		return err
	}
	if mark.file != "" {
		if st, err := os.Stat(mark.file); err == nil && st.Size() > mark.size {
			if err := os.Truncate(mark.file, mark.size); err != nil {
				return err
			}
		}
	}
	if err := n.server.Start(ctx); err != nil {
		return err
	}
	n.killed = false
	return nil
}

// currentAOF returns the incremental append-only file that Redis 7 appends
// to, from the manifest in dir's appendonlydir.
func currentAOF(dir string) (string, error) {
	aofDir := filepath.Join(dir, "appendonlydir")
	f, err := os.Open(filepath.Join(aofDir, "appendonly.aof.manifest"))
	if err != nil {
		return "", fmt.Errorf("no append-only file (cluster Options.EverySec): %w", err)
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// file appendonly.aof.1.incr.aof seq 1 type i
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && fields[0] == "file" && fields[len(fields)-1] == "i" {
			last = fields[1]
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if last == "" {
		return "", errors.New("the append-only manifest names no incremental file")
	}
	return filepath.Join(aofDir, last), nil
}

// startReplicas starts a replica for every node, replicating through a
// proxy of its own (so the nemesis can make it lag), and waits until each
// has synced.
func (c *Cluster) startReplicas(ctx context.Context) error {
	for _, n := range c.Nodes {
		r, err := c.backend.Start(ctx, c.opts)
		if err != nil {
			return err
		}
		link, err := redistest.Forward(n.server.Addr())
		if err != nil {
			return errors.Join(err, r.Close(ctx))
		}
		n.mu.Lock()
		n.replica, n.replLink = r, link
		n.mu.Unlock()
		if err := attach(ctx, r, link.Addr); err != nil {
			return err
		}
	}
	return nil
}

// attach makes r a replica of master and waits until its link is up.
func attach(ctx context.Context, r Server, master string) error {
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		return err
	}
	rc := NewClient(r.Addr())
	defer rc.Close()
	if err := rc.ReplicaOf(ctx, host, port).Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s of %s not in sync: %w (last error: %v)", r.Addr(), master, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// StallReplica holds back the replication stream to the node's replica
// (its link's proxy stops passing data): from now on the replica lags
// behind its master, as a replica on a slow link does.
func (n *Node) StallReplica(_ context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.replica == nil {
		return errors.New("failover: the node has no replica (cluster Options.Replicas)")
	}
	// The replica is the link's client: the stream is the replies.
	if err := n.replLink.UpdateFaults(func(f *redistest.Faults) { f.DropReplies = true }); err != nil {
		return err
	}
	n.replicaStalled = true
	return nil
}

// unstall lets the replication stream flow again; n.mu is held.
func (n *Node) unstallLocked() {
	if !n.replicaStalled {
		return
	}
	// Dropping no replies is a valid change: UpdateFaults cannot fail.
	_ = n.replLink.UpdateFaults(func(f *redistest.Faults) { f.DropReplies = false })
	n.replicaStalled = false
}

// Failover kills the node's master (SIGKILL), promotes its replica
// (REPLICAOF NO ONE) with whatever it had replicated, points the proxy at
// it, and starts the old master again, empty, as the new replica. Clients
// keep the node's address; their connections are cut once.
func (n *Node) Failover(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.replica == nil {
		return errors.New("failover: the node has no replica (cluster Options.Replicas)")
	}
	old, promoted := n.server, n.replica
	if err := n.killLocked(ctx); err != nil {
		return err
	}
	// Closing the link drops what it held back: the replica promotes with
	// what it had.
	n.replLink.Isolate()
	n.unstallLocked()
	rc := NewClient(promoted.Addr())
	err := rc.ReplicaOf(ctx, "NO", "ONE").Err()
	err = errors.Join(err, rc.Close())
	if err != nil {
		return fmt.Errorf("promoting the replica: %w", err)
	}
	n.proxy.MoveTo(promoted.Addr())
	n.proxy.Disconnect()
	n.server, n.replica = promoted, old
	if err := old.Start(ctx); err != nil {
		return err
	}
	n.killed = false
	n.replLink.MoveTo(promoted.Addr())
	if err := n.replLink.Reconnect(); err != nil {
		return fmt.Errorf("pointing the replication link at the promoted replica: %w", err)
	}
	return attach(ctx, old, n.replLink.Addr)
}

// clocked is a server started under the clock shim.
type clocked interface{ Clock() *redistest.Clock }

// SetClock moves the server's wall clock by jump and lets it run at rate
// (1 is real speed). It fails with ErrUnsupported unless the cluster was
// started with Options.Clock on the process backend.
func (n *Node) SetClock(jump time.Duration, rate float64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.server.(clocked)
	if !ok || c.Clock() == nil {
		return fmt.Errorf("clock fault: %w (it needs processes started with Options.Clock)", ErrUnsupported)
	}
	n.clockMoved = true
	return c.Clock().Set(jump, rate)
}

// healData undoes the data faults that last: the clock, read-only mode,
// filler keys, a stalled replica.
func (n *Node) healData(ctx context.Context) error {
	n.mu.Lock()
	readonly, filled, stalled, moved := n.readonly, n.filled, n.replicaStalled, n.clockMoved
	n.filled, n.clockMoved = 0, false
	var clk *redistest.Clock
	if c, ok := n.server.(clocked); ok {
		clk = c.Clock()
	}
	n.mu.Unlock()
	var errs []error
	if moved && clk != nil {
		errs = append(errs, clk.Reset())
	}
	if readonly {
		errs = append(errs, n.Writable(ctx))
	}
	if filled > 0 {
		errs = append(errs, n.unfill(ctx, filled))
	}
	if stalled {
		n.mu.Lock()
		n.unstallLocked()
		n.mu.Unlock()
	}
	return errors.Join(errs...)
}
