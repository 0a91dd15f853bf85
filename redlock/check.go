package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/conn"

	"github.com/quorumlock/redlock/redlock/internal/scripts"

	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// DefaultClockWindow is how long Check measures the servers' clock rates
// over, unless WithClockWindow says otherwise.
const DefaultClockWindow = 3 * time.Second

// minCheckTimeout is the least bound on each of Check's calls to a node:
// a slow node is to be reported as slow, not as unreachable, even under a
// short node timeout.
const minCheckTimeout = time.Second

// Round trips that Check makes to measure a node's latency, and to read
// its clock (the one with the shortest round trip counts).
const (
	checkPings     = 5
	checkClockRuns = 5
)

// CheckOption configures one Locker.Check.
type CheckOption func(*checkConfig)

type checkConfig struct {
	window time.Duration
}

// WithClockWindow sets how long Check measures the servers' clock rates
// over: it reads every server's clock at the start and again once d has
// passed. A longer window sees smaller rate differences, since the round
// trips' uncertainty is spread over it. 0 measures the clocks' offsets
// only. A negative d makes Check fail with an error matching ErrInvalid.
// Default DefaultClockWindow.
func WithClockWindow(d time.Duration) CheckOption {
	return func(c *checkConfig) { c.window = d }
}

// Check asks every node whether it meets the assumptions of the safety
// model, and reports, per node and for the whole set, what it found: each
// finding with a severity (ok, warning, error) and a one-line fix. It
// checks that the node answers and how fast; its server version; that the
// library's scripts and commands may run (ACL permissions included); that
// no two nodes reach the same server (run_id); that each node is a master
// outside any Redis Cluster; what a restart does to the locks it granted
// (appendonly, appendfsync, save, and the restart guard); that its
// maxmemory-policy cannot evict lock keys, and its memory headroom; its
// clock against this machine's and the other servers' (offset, and rate
// over the clock window, see WithClockWindow), against what the drift
// factor covers for the Locker's TTL; the restart guard's marker and
// quarantine (whether it abstains, and for how long, and whether Bootstrap
// is needed); and the number of nodes.
//
// Check reads and writes nothing a lock depends on: it runs the library's
// scripts on a key of its own (under ReservedPrefix) that it deletes at
// once. It asks the nodes directly, not through the voting path, so a node
// that reaches the same server as another is reported, not refused. Where
// the server refuses a command (CONFIG is often renamed or forbidden on
// managed services), the finding says what could not be verified.
//
// It takes at least the clock window. Unreachable nodes are findings, not
// errors: the error is ErrClosed after Close, an error matching ErrInvalid
// for a bad option, or one matching ctx.Err() when ctx ended before every
// node was asked (the report then holds what was found so far).
func (l *Locker) Check(ctx context.Context, opts ...CheckOption) (*Report, error) {
	cc := checkConfig{window: DefaultClockWindow}
	for _, o := range opts {
		if o != nil {
			o(&cc)
		}
	}
	if cc.window < 0 {
		return nil, invalid("clock window %v must not be negative", cc.window)
	}
	if err := l.closedErr(); err != nil {
		return nil, err
	}
	timeout := max(l.cfg.nodeTimeout, minCheckTimeout)
	// The probes use the Locker's connections: so do go-redis's lines.
	ctx = conn.WithRoute(ctx, l.cfg.route())
	probes := make([]nodeProbe, len(l.nodes))
	// Every node is asked everything and nothing is counted or decided
	// while they answer: a plain fan-out, not a quorum round.
	each := func(fn func(i int)) {
		var wg sync.WaitGroup
		for i := range l.nodes {
			wg.Go(func() { fn(i) })
		}
		wg.Wait()
	}
	each(func(i int) {
		p := &probes[i]
		p.rep.Addr = l.nodes[i].addr
		p.probe(ctx, l.nodes[i].pipe.Client(), timeout)
	})
	if cc.window > 0 && ctx.Err() == nil {
		t := time.NewTimer(cc.window)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() == nil {
			each(func(i int) { probes[i].clockRate(ctx, l.nodes[i].pipe.Client(), timeout) })
		}
	}
	nodes := make([]NodeReport, len(probes))
	for i := range probes {
		nodes[i] = probes[i].rep
	}
	rep := assess(nodes, &l.cfg, l.need, cc.window)
	if err := l.closedErr(); err != nil {
		return rep, err
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("redlock: check cut short: %w", err)
	}
	return rep, nil
}

// nodeProbe gathers the facts of one node.
type nodeProbe struct {
	rep   NodeReport
	first clockSample
}

// clockSample is one reading of a server's clock: the server's time, this
// machine's time half-way through the round trip (with its monotonic
// reading), and the round trip.
type clockSample struct {
	server, mid time.Time
	rtt         time.Duration
}

// isReply reports whether err is nil or a reply of the server (an error
// reply, or nil for a missing key), rather than a failure to talk to it.
func isReply(err error) bool {
	var re redis.Error
	return err == nil || errors.As(err, &re)
}

// checkCall runs fn with a context bounded by timeout: the Locker's private
// clients take their deadlines from the call's context alone.
func checkCall(ctx context.Context, timeout time.Duration, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx)
}

// configNames are the settings Check reads with CONFIG GET, one at a time
// (several in one CONFIG GET needs Redis 7.0).
var configNames = []string{"appendonly", "appendfsync", "save"}

// probe asks the node for its facts, in a few round trips. A node that does
// not answer a PING is unreachable, and asked nothing more.
func (p *nodeProbe) probe(ctx context.Context, c *redis.Client, timeout time.Duration) {
	r := &p.rep
	r.MaxMemory, r.UsedMemory, r.EvictedKeys = -1, -1, -1
	// The first PING may dial; the others measure the round trip.
	rtts := make([]time.Duration, 0, checkPings)
	for i := range checkPings + 1 {
		start := time.Now()
		if err := checkCall(ctx, timeout, func(ctx context.Context) error { return c.Ping(ctx).Err() }); err != nil {
			r.Err = err
			return
		}
		if i > 0 {
			rtts = append(rtts, time.Since(start))
		}
	}
	slices.Sort(rtts)
	r.Latency, r.MaxLatency = rtts[len(rtts)/2], rtts[len(rtts)-1]

	var (
		info       *redis.StringCmd
		cfg        = make([]*redis.MapStringStringCmd, len(configNames))
		marker     *redis.StringCmd
		quarantine *redis.DurationCmd
		self       *redis.Cmd
	)
	err := checkCall(ctx, timeout, func(ctx context.Context) error {
		pl := c.Pipeline()
		info = pl.Info(ctx) // the default sections hold all we read
		for i, name := range configNames {
			cfg[i] = pl.ConfigGet(ctx, name)
		}
		marker = pl.Get(ctx, guardMarker)
		quarantine = pl.PTTL(ctx, guardQuarantine)
		// The lock's connections learn their id with it (see open).
		self = pl.Do(ctx, "client", "info")
		_, err := pl.Exec(ctx)
		return err
	})
	if !isReply(err) {
		r.Err = err
		return
	}
	fields := parseInfo(info.Val())
	p.readInfo(fields, info.Err())
	p.readConfig(cfg, fields)
	p.readGuard(fields, marker, quarantine)
	if err := self.Err(); err != nil {
		r.ScriptsErr = fmt.Errorf("CLIENT INFO: %w", err)
	} else {
		r.ScriptsErr = p.runScripts(ctx, c, timeout)
	}
	if err := r.ScriptsErr; !isReply(err) {
		// The node stopped answering.
		r.Err = err
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

// readGuard reads the restart guard's state: the marker's stamp against
// the server's current run_id and evicted-keys count (as the acquire script
// compares them), and the quarantine's time left.
func (p *nodeProbe) readGuard(info map[string]string, marker *redis.StringCmd, quarantine *redis.DurationCmd) {
	g := &p.rep.Guard
	mErr, qErr := marker.Err(), quarantine.Err()
	if errors.Is(mErr, redis.Nil) {
		mErr = nil
	}
	run, evicted := info["run_id"], info["evicted_keys"]
	if mErr != nil || qErr != nil || run == "" || evicted == "" {
		p.rep.GuardErr = errors.Join(mErr, qErr)
		if p.rep.GuardErr == nil {
			p.rep.GuardErr = errors.New("INFO shows no run_id or evicted_keys")
		}
		return
	}
	g.Known = true
	if q := quarantine.Val(); q > 0 {
		g.Abstain = q
	}
	stamp := marker.Val()
	if stamp == "" {
		return
	}
	g.Marker = true
	oldRun, oldEvicted, _ := strings.Cut(stamp, " ")
	switch {
	case oldRun != run:
		g.Stale = "the server restarted or was promoted from replica since it was stamped (run_id " + oldRun + ")"
	case oldEvicted != evicted:
		g.Stale = fmt.Sprintf("the server evicted keys since it was stamped (evicted_keys %s, then %s)", evicted, oldEvicted)
	default:
		g.Current = true
	}
}

// runScripts runs the library's scripts as a lock would, on a key of
// Check's own that lives a second at most: inspect (read only), then, on
// a master, acquire and release. The error names the step.
func (p *nodeProbe) runScripts(ctx context.Context, c *redis.Client, timeout time.Duration) error {
	key := ReservedPrefix + "check:" + uuid.NewString()
	token := "check-" + uuid.NewString()
	type step struct {
		name string
		run  func(ctx context.Context) error
	}
	steps := []step{{"inspect script", func(ctx context.Context) error {
		return scripts.Inspect.Run(ctx, c, []string{key, fenceKey(key)}).Err()
	}}}
	// A replica refuses writes: its role is the finding, not its scripts.
	if p.rep.Role != "slave" {
		steps = append(steps,
			step{"acquire script", func(ctx context.Context) error {
				return scripts.Acquire.Run(ctx, c, []string{key}, token+"\x001\x00", 1000, token+"\x00").Err()
			}},
			step{"release script", func(ctx context.Context) error {
				return scripts.Release.Run(ctx, c, []string{key}, releaseArgs(holder{prefix: token + "\x00", hold: "1"}, "", 0)...).Err()
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

// readClock reads the server's clock a few times and keeps the reading
// with the shortest round trip, the most precise.
func readClock(ctx context.Context, c *redis.Client, timeout time.Duration) (clockSample, error) {
	var best clockSample
	for i := range checkClockRuns {
		var t time.Time
		start := time.Now()
		err := checkCall(ctx, timeout, func(ctx context.Context) error {
			var err error
			t, err = c.Time(ctx).Result()
			return err
		})
		rtt := time.Since(start)
		if err != nil {
			return clockSample{}, fmt.Errorf("TIME: %w", err)
		}
		if i == 0 || rtt < best.rtt {
			best = clockSample{server: t, mid: start.Add(rtt / 2), rtt: rtt}
		}
	}
	return best, nil
}

// clockRate reads the clock again, at the end of the clock window, and
// works out its rate against this machine's monotonic clock.
func (p *nodeProbe) clockRate(ctx context.Context, c *redis.Client, timeout time.Duration) {
	r := &p.rep
	if r.Err != nil || r.ClockErr != nil || p.first.mid.IsZero() {
		return
	}
	s, err := readClock(ctx, c, timeout)
	if err != nil {
		r.ClockErr = err
		return
	}
	elapsed := s.mid.Sub(p.first.mid)
	if elapsed <= 0 {
		return
	}
	r.ClockRate = float64(s.server.Sub(p.first.server)) / float64(elapsed)
	r.ClockRateUncertainty = float64(p.first.rtt/2+s.rtt/2) / float64(elapsed)
	r.ClockOffset, r.ClockUncertainty = s.server.Sub(s.mid), s.rtt/2
}
