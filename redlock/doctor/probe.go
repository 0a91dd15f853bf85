package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Round trips that Check makes to measure a node's latency, and to read
// its clock (the one with the shortest round trip counts).
const (
	pings     = 5
	clockRuns = 5
)

// The library's own keys that Check reads: the restart guard's marker and
// quarantine, named where the lock core names them.
const (
	guardMarker     = wire.GuardMarker
	guardQuarantine = wire.GuardQuarantine
)

// nodeProbe gathers the facts of one master: a standalone node, or a
// shard of a cluster or Sentinel group (kind).
type nodeProbe struct {
	conn  *nodeConn
	rep   Node
	first clockSample
	kind  Kind
	// slots are the slots a cluster's master serves: its script check
	// runs on a key of the first.
	slots []int
	// guardSlots are the slots whose restart guard keys are read, where
	// the quorum keeps them per slot; nil where it keeps one of each.
	guardSlots []int
}

// isReply reports whether err is nil or a reply of the server (an error
// reply, or nil for a missing key), rather than a failure to talk to it.
func isReply(err error) bool {
	var re redis.Error
	return err == nil || errors.As(err, &re)
}

// checkCall runs fn with a context bounded by timeout: the checker's own
// clients take their deadlines from the call's context alone.
func checkCall(ctx context.Context, timeout time.Duration, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx)
}

// configNames are the settings Check reads with CONFIG GET, one at a time
// (several in one CONFIG GET needs Redis 7.0); a cluster's masters and a
// Sentinel group's master have some more (configExtra).
var (
	configNames = []string{"appendonly", "appendfsync", "save"}
	configExtra = map[Kind][]string{
		KindCluster:  {"cluster-node-timeout"},
		KindSentinel: {"min-replicas-to-write", "min-replicas-max-lag"},
	}
)

// probe asks the node for its facts, in a few round trips. A node that
// cannot be dialled or does not answer a PING is unreachable, and asked
// nothing more.
func (p *nodeProbe) probe(ctx context.Context, timeout time.Duration) {
	r := &p.rep
	r.MaxMemory, r.UsedMemory, r.EvictedKeys = -1, -1, -1
	r.MinReplicasToWrite, r.MinReplicasMaxLag = -1, -1
	if err := p.conn.connect(ctx); err != nil {
		r.Err = err
		return
	}
	c := p.conn.client
	if err := p.measureLatency(ctx, c, timeout); err != nil {
		r.Err = err
		return
	}
	if !p.gather(ctx, c, timeout) {
		return
	}
	s, err := readClock(ctx, c, timeout)
	if err != nil {
		r.ClockErr = err
		return
	}
	p.first = s
	r.ClockOffset, r.ClockUncertainty = s.server.Sub(s.mid), s.rtt/2
}

// measureLatency PINGs the node to fill in the report's median and
// largest round trip, and returns the error of a PING that failed.
func (p *nodeProbe) measureLatency(ctx context.Context, c *redis.Client, timeout time.Duration) error {
	// The first PING logs in; the others measure the round trip.
	rtts := make([]time.Duration, 0, pings)
	for i := range pings + 1 {
		start := time.Now()
		if err := checkCall(ctx, timeout, func(ctx context.Context) error { return c.Ping(ctx).Err() }); err != nil {
			return err
		}
		if i > 0 {
			rtts = append(rtts, time.Since(start))
		}
	}
	slices.Sort(rtts)
	p.rep.Latency, p.rep.MaxLatency = rtts[len(rtts)/2], rtts[len(rtts)-1]
	return nil
}

// gather reads the node's settings, its guard's state and its cluster
// state in one pipeline, then runs the scripts; it reports false when the
// node stopped answering.
func (p *nodeProbe) gather(ctx context.Context, c *redis.Client, timeout time.Duration) bool {
	r := &p.rep
	names := append(slices.Clip(configNames), configExtra[p.kind]...)
	var (
		info       *redis.StringCmd
		cfg        = make([]*redis.MapStringStringCmd, len(names))
		marker     *redis.StringCmd
		quarantine *redis.DurationCmd
		cluster    *redis.StringCmd
		self       *redis.Cmd
	)
	err := checkCall(ctx, timeout, func(ctx context.Context) error {
		pl := c.Pipeline()
		info = pl.Info(ctx) // the default sections hold all we read
		for i, name := range names {
			cfg[i] = pl.ConfigGet(ctx, name)
		}
		if p.guardSlots == nil {
			marker = pl.Get(ctx, guardMarker)
			quarantine = pl.PTTL(ctx, guardQuarantine)
		}
		if p.kind == KindCluster {
			cluster = pl.ClusterInfo(ctx)
		}
		// A lock's connections learn their id with it.
		self = pl.Do(ctx, "client", "info")
		_, err := pl.Exec(ctx)
		return err
	})
	if !isReply(err) {
		r.Err = err
		return false
	}
	fields := parseInfo(info.Val())
	p.readInfo(fields, info.Err())
	p.readConfig(cfg[:len(configNames)], fields)
	p.readExtra(cfg[len(configNames):])
	if cluster != nil {
		p.readCluster(cluster)
	}
	if p.guardSlots == nil {
		p.readGuard(fields, marker, quarantine)
	} else if !p.readSlotGuards(ctx, c, timeout, fields) {
		return false
	}
	if err := self.Err(); err != nil {
		r.ScriptsErr = fmt.Errorf("CLIENT INFO: %w", err)
	} else {
		r.ScriptsErr = p.runScripts(ctx, c, timeout)
	}
	if err := r.ScriptsErr; !isReply(err) {
		// The node stopped answering.
		r.Err = err
		return false
	}
	return true
}

// parseInfo splits an INFO reply into its fields.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

func (p *nodeProbe) readInfo(f map[string]string, err error) {
	r := &p.rep
	if err != nil {
		r.InfoErr = err
		return
	}
	r.Version, r.RunID, r.Role = f["redis_version"], f["run_id"], f["role"]
	r.Replicas, _ = strconv.Atoi(f["connected_slaves"])
	r.Cluster = f["cluster_enabled"] == "1"
	r.MaxMemoryPolicy = f["maxmemory_policy"]
	for name, dst := range map[string]*int64{"maxmemory": &r.MaxMemory, "used_memory": &r.UsedMemory, "evicted_keys": &r.EvictedKeys} {
		if v, err := strconv.ParseInt(f[name], 10, 64); err == nil {
			*dst = v
		}
	}
	if host := f["master_host"]; r.Role == "slave" && host != "" {
		r.MasterAddr = host + ":" + f["master_port"]
	}
}

// readConfig takes the persistence settings from CONFIG GET; where CONFIG
// was refused, appendonly comes from INFO persistence, and the rest stays
// unknown.
func (p *nodeProbe) readConfig(cfg []*redis.MapStringStringCmd, info map[string]string) {
	r := &p.rep
	for i, cmd := range cfg {
		if err := cmd.Err(); err != nil {
			r.ConfigErr = err
			break
		}
		v, ok := cmd.Val()[configNames[i]]
		if !ok {
			r.ConfigErr = fmt.Errorf("CONFIG GET %s: no such setting", configNames[i])
			break
		}
		switch configNames[i] {
		case "appendonly":
			r.AppendOnly = v
		case "appendfsync":
			r.AppendFsync = v
		case "save":
			r.Save = v
		}
	}
	if r.ConfigErr != nil {
		r.AppendOnly, r.AppendFsync, r.Save = "", "", ""
		switch info["aof_enabled"] {
		case "1":
			r.AppendOnly = "yes"
		case "0":
			r.AppendOnly = "no"
		}
	}
}

// runScripts runs the library's scripts as a lock would, on a key of
// Check's own that lives a second at most: inspect (read only), then, on
// a master, acquire and release. The error names the step.
func (p *nodeProbe) runScripts(ctx context.Context, c *redis.Client, timeout time.Duration) error {
	key := wire.CheckPrefix + uuid.NewString()
	if len(p.slots) > 0 {
		// A key of a slot this master serves, and so are the keys the
		// scripts derive from it (the tag comes first).
		key = wire.CheckPrefix + wire.SlotTag(p.slots[0]) + uuid.NewString()
	}
	value, h := wire.Value("check-"+uuid.NewString(), "1", "")
	type step struct {
		name string
		run  func(ctx context.Context) error
	}
	steps := []step{{"inspect script", func(ctx context.Context) error {
		return scripts.Inspect.Run(ctx, c, []string{key, wire.FenceKey(key)}).Err()
	}}}
	// A replica refuses writes: its role is the finding, not its scripts.
	if p.rep.Role != "slave" {
		steps = append(steps,
			step{"acquire script", func(ctx context.Context) error {
				return scripts.Acquire.Run(ctx, c, []string{key}, wire.AcquireArgs(value, 1000, h)...).Err()
			}},
			step{"release script", func(ctx context.Context) error {
				return scripts.Release.Run(ctx, c, []string{key}, wire.ReleaseArgs(h, "", 0)...).Err()
			}},
		)
	}
	for _, s := range steps {
		if err := checkCall(ctx, timeout, s.run); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}
