package chaos_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/integration/chaos"
	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/integration/internal/backendtest"
	"github.com/quorumlock/redlock/integration/internal/flags"
)

// seed is the run's seed: -chaos.seed, or a fresh one.
var seed uint64

// totals add up every scenario of the run for the last line.
var totals struct {
	sync.Mutex
	acquisitions, violations, faults int
	// The unguarded scenario's violations are expected; they are
	// reported apart from the asserted ones.
	weakness []string
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the nemesis makes plenty on purpose.
	redis.SetLogger(quietLogger{})
	// The scenarios' client processes are this binary, run again.
	chaos.ServeClientProcess()
	flag.Parse()
	seed = *flags.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Printf("chaos: seed %d (replay with -chaos.seed=%d)\n", seed, seed)
	code := m.Run()
	if code == 0 {
		// toxiproxy's own link goroutines can stay blocked on a channel
		// send after their connection broke (the writer stops reading
		// when a write fails); they are the proxy library's, not ours.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	for _, w := range totals.weakness {
		fmt.Println(w)
	}
	fmt.Printf("chaos: %d acquisitions, %d violations, %d faults injected, seed %d\n",
		totals.acquisitions, totals.violations, totals.faults, seed)
	os.Exit(code)
}

// longRun is the -chaos.duration from which every scenario runs on every
// backend.
const longRun = time.Minute

func TestChaosProcesses(t *testing.T) { runScenarios(t, cluster.Processes{}, chaos.Scenarios) }

// TestChaosContainers runs the scenarios on containers. A short run (the
// one in the default test suite) keeps it well under a minute with the
// scenarios whose safety is asserted and whose faults act on the servers
// (docker kill, start, pause), where the backends differ; the network and
// client faults act on the proxies and clients, which are the same for
// both, and run on processes. A long run runs them all.
func TestChaosContainers(t *testing.T) {
	backend := backendtest.Containers(t)
	scenarios := chaos.Scenarios
	if *flags.Duration < longRun {
		scenarios = nil
		for _, sc := range chaos.Scenarios {
			if sc.Safe && sc.TouchesServers() {
				scenarios = append(scenarios, sc)
			}
		}
		t.Logf("short run: %d of %d scenarios (all of them from -chaos.duration=%v)", len(scenarios), len(chaos.Scenarios), longRun)
	}
	runScenarios(t, backend, scenarios)
}

// runScenarios runs scenarios on backend, sharing -chaos.duration out among
// them. Scenarios share a cluster (one with persistence, one without), reset
// between them.
func runScenarios(t *testing.T, backend cluster.Backend, scenarios []chaos.Scenario) {
	per := max(*flags.Duration/time.Duration(len(scenarios)), time.Second)
	clusters := make(map[bool]*cluster.Cluster)
	t.Cleanup(func() {
		for _, c := range clusters {
			if err := c.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			c := clusters[sc.Persistent]
			if c == nil {
				var err error
				c, err = cluster.Start(t.Context(), backend, chaos.Nodes, cluster.Options{Persistent: sc.Persistent})
				if err != nil {
					t.Fatal(err)
				}
				clusters[sc.Persistent] = c
			}
			cfg := chaos.DefaultConfig()
			cfg.Clients, cfg.Goroutines, cfg.Keys = *flags.Clients, *flags.Goroutines, *flags.Keys
			cfg.TTL, cfg.MaxHold = *flags.TTL, *flags.MaxHold
			cfg.Duration = per
			cfg.Seed = seed
			cfg.Logf = t.Logf
			r, err := chaos.Run(t.Context(), c, sc, cfg)
			if err != nil {
				t.Fatalf("%v (seed %d)", err, seed)
			}
			t.Logf("%s on %s: %s", sc.Name, backend.Name(), r)
			totals.Lock()
			defer totals.Unlock()
			totals.acquisitions += r.Acquisitions
			totals.faults += r.FaultCount()
			if !sc.Safe {
				totals.weakness = append(totals.weakness, fmt.Sprintf(
					"chaos: %s on %s (known weakness, not asserted): %d violations in %d acquisitions, %d faults",
					sc.Name, backend.Name(), len(r.Violations), r.Acquisitions, r.FaultCount()))
				return
			}
			totals.violations += len(r.Violations)
			if len(r.Violations) > 0 {
				t.Errorf("%s: mutual exclusion violated; replay with -chaos.seed=%d", sc.Name, seed)
			}
			if sc.CountersLost && !sc.Guard {
				return
			}
			if !r.Fencing.Checked {
				t.Errorf("%s: fencing is on but every fence was 0", sc.Name)
			}
			if r.Fencing.Failed() {
				totals.violations += len(r.Fencing.OutOfOrder) + len(r.Fencing.StaleAccepted) + len(r.Fencing.ValidRejected)
				t.Errorf("%s: fencing violated; replay with -chaos.seed=%d", sc.Name, seed)
			}
		})
	}
}
