package harness

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

// Cluster is the nodes every mode runs on (LocalNodes started here, or at
// least NodeCount given), with two client sets:
// Direct, and Faulty, the same but with one node reached through a fault
// proxy.
type Cluster struct {
	Addrs  []string
	Direct []redis.UniversalClient
	Faulty []redis.UniversalClient
	Proxy  *redistest.Forwarder
	// Version is the redis_version the first node reports.
	Version string

	servers []*redistest.Server // started by us; nil with -nodes
}

// newClient returns a client for addr set up exactly as
// redistest.Server.NewClient sets one up (context deadlines honoured, no
// command retries, RESP2), so every library gets the same client whether
// the harness started the servers or was given them.
func newClient(addr string) *redis.Client {
	s := redistest.Server{Addr: addr}
	return s.NewClient()
}

// StartCluster starts LocalNodes local redis-server processes, or connects
// to addrs (at least NodeCount) when given, and puts a fault proxy in front of node faultNode
// (0-based). On failure it leaves nothing running.
func StartCluster(ctx context.Context, addrs []string, faultNode int) (c *Cluster, err error) {
	c = &Cluster{}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
			c = nil
		}
	}()
	if len(addrs) == 0 {
		if c.servers, err = redistest.StartN(LocalNodes, redistest.Options{}); err != nil {
			return c, err
		}
		for _, s := range c.servers {
			addrs = append(addrs, s.Addr)
		}
	}
	if len(addrs) < NodeCount {
		return c, fmt.Errorf("need at least %d nodes, got %d: %s", NodeCount, len(addrs), strings.Join(addrs, ","))
	}
	if faultNode < 0 || faultNode >= NodeCount {
		return c, fmt.Errorf("fault node %d out of range", faultNode)
	}
	c.Addrs = addrs
	for _, a := range addrs {
		c.Direct = append(c.Direct, newClient(a))
	}
	for i, cl := range c.Direct {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := cl.Ping(pctx).Err()
		cancel()
		if err != nil {
			return c, fmt.Errorf("node %s: %w", addrs[i], err)
		}
	}
	if c.Proxy, err = redistest.Forward(addrs[faultNode]); err != nil {
		return c, err
	}
	c.Faulty = append([]redis.UniversalClient(nil), c.Direct...)
	c.Faulty[faultNode] = newClient(c.Proxy.Addr)
	c.Version = serverVersion(ctx, c.Direct[0])
	return c, nil
}

// serverVersion returns the redis_version a node reports, or "".
func serverVersion(ctx context.Context, c redis.UniversalClient) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

// Local reports whether the harness started the servers itself.
func (c *Cluster) Local() bool { return len(c.servers) > 0 }

// Close closes the clients, then the proxy, then the servers it started.
func (c *Cluster) Close() error {
	var errs []error
	closed := map[redis.UniversalClient]bool{}
	for _, cl := range append(append([]redis.UniversalClient(nil), c.Direct...), c.Faulty...) {
		if !closed[cl] {
			closed[cl] = true
			errs = append(errs, cl.Close())
		}
	}
	if c.Proxy != nil {
		errs = append(errs, c.Proxy.Close())
	}
	for _, s := range c.servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// ServerCPU returns the CPU time the servers have used (user and system,
// from INFO cpu, summed over every node of Direct), in µs.
func (c *Cluster) ServerCPU(ctx context.Context) (float64, error) {
	var total float64
	for i, cl := range c.Direct {
		cpu, err := nodeCPU(ctx, cl)
		if err != nil {
			return 0, fmt.Errorf("node %d: %w", i+1, err)
		}
		total += cpu
	}
	return total, nil
}

// nodeCPU returns the CPU time the server that c reaches has used (user
// and system, from INFO cpu), in µs.
func nodeCPU(ctx context.Context, c redis.UniversalClient) (float64, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %s: %w", k, err)
		}
		total += sec * 1e6
	}
	return total, nil
}
