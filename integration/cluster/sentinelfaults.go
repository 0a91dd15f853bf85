package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// The faults of a Sentinel group node of the quorum. Each fails group i's
// master over through its sentinels (SENTINEL FAILOVER) and says what it
// did. wait is the fault's duration: the nemesis sleeps there, until its
// run ends at the latest.

// Failover has the sentinels of group i promote its promotable replica
// (SENTINEL FAILOVER), leaves the demoted master as the failover leaves
// it for wait, and then points it at the new master as a sentinel would
// (which takes it about ten seconds: until then it says it is a master,
// and takes writes while a replica still follows it, for about a second
// under min-replicas-to-write 1). Sentinel does not wait for the replica
// to catch up: a write acknowledged just before the switch may be lost.
func (sg *SentinelGroups) Failover(ctx context.Context, i int, wait func()) (string, error) {
	g := sg.Groups[i]
	old, promoted, err := g.Failover(ctx)
	if err != nil {
		return "", err
	}
	began := time.Now()
	wait()
	role, err := old.Role(ctx)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("%s took over from %s, which said %s %v later", promoted.Addr, old.Addr, role, time.Since(began).Round(time.Millisecond))
	return what, settle(ctx, g, promoted)
}

// FailoverLosingWrites plays a failover to a lagging replica: the
// promotable replica's link to the master is cut (CLIENT KILL TYPE master
// on the replica) and kept down (a masterauth the master refuses); the
// master goes on acknowledging writes for wait, which the witness
// receives (so min-replicas-to-write 1 does not stop them) and the
// promotable replica never does; then the sentinels promote it (SENTINEL
// FAILOVER). The demoted master and the witness then synchronise with the
// new master in full and drop the writes of the wait: locks, fencing
// counters and the restart guard's marker updates.
func (sg *SentinelGroups) FailoverLosingWrites(ctx context.Context, i int, wait func()) (string, error) {
	g := sg.Groups[i]
	m, err := g.Master(ctx)
	if err != nil {
		return "", err
	}
	r, err := promotable(g, m)
	if err != nil {
		return "", err
	}
	err = configSet(ctx, r, "masterauth", "not-the-masters")
	if err == nil {
		cl := r.NewClient()
		err = errors.Join(cl.ClientKillByFilter(ctx, "TYPE", "master").Err(), cl.Close())
	}
	var promoted *redistest.Server
	var missed int64
	if err == nil {
		wait()
		if missed, err = lag(ctx, m, r); err == nil {
			_, promoted, err = g.Failover(ctx)
		}
	}
	// Whatever failed, the replica must be able to reach a master again.
	if rerr := configSet(ctx, r, "masterauth", ""); rerr != nil || err != nil {
		return "", errors.Join(err, rerr)
	}
	if promoted != r {
		return "", fmt.Errorf("the sentinels promoted %s, not the lagging replica %s", promoted.Addr, r.Addr)
	}
	if err := settle(ctx, g, promoted); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s took over from %s without its last %d bytes of writes", promoted.Addr, m.Addr, missed), nil
}

// lag returns how far replica r is behind master m, in bytes of the
// replication stream: what r misses if it takes over now.
func lag(ctx context.Context, m, r *redistest.Server) (int64, error) {
	mc, rc := m.NewClient(), r.NewClient()
	defer mc.Close()
	defer rc.Close()
	want, err := replOffset(ctx, mc, "master_repl_offset:")
	if err != nil {
		return 0, err
	}
	got, err := replOffset(ctx, rc, "slave_repl_offset:")
	if err != nil {
		return 0, err
	}
	return want - got, nil
}

// promotable returns the data server of g that a failover from master m
// promotes: the one that is neither m nor the witness (the last server,
// of replica-priority 0).
func promotable(g *redistest.SentinelGroup, m *redistest.Server) (*redistest.Server, error) {
	for _, s := range g.Servers[:len(g.Servers)-1] {
		if s != m {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no promotable replica besides the master %s", m.Addr)
}
