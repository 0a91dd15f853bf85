package redlockotel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quorumlock/redlock/internal/locktest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlockotel"
)

// telemetry is an Observer wired to a Prometheus registry, through the
// OpenTelemetry exporter, and to a span recorder.
type telemetry struct {
	obs   *redlockotel.Observer
	reg   *prometheus.Registry
	spans *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		if err := errors.Join(mp.Shutdown(context.Background()), tp.Shutdown(context.Background())); err != nil {
			t.Error(err)
		}
	})
	obs, err := redlockotel.NewObserver(redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	return &telemetry{obs: obs, reg: reg, spans: spans, tp: tp}
}

// scrape fetches the registry through the promhttp handler, as Prometheus
// would, and parses the text exposition.
func (tm *telemetry) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(tm.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("scrape: %v\n%s", err, body)
	}
	return fams
}

// sample returns the count (counter value, or histogram sample count) and
// the histogram sum of the series of family name whose labels include
// want; found is false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (count, sum float64, found bool) {
	f := fams[name]
	if f == nil {
		return 0, 0, false
	}
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		found = true
		if h := m.GetHistogram(); h != nil {
			count += float64(h.GetSampleCount())
			sum += h.GetSampleSum()
		} else {
			count += m.GetCounter().GetValue()
		}
	}
	return count, sum, found
}

// Every kind of event reaches Prometheus, scraped over HTTP from real
// operations on real servers: obtains and their outcomes, waits, holds,
// extensions, per-node outcomes (a dead node's errors among them),
// abstentions and a loss.
func TestPrometheusScrape(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	clients := redistest.ClientsT(t, servers)
	tm := newTelemetry(t)
	opts := []redlock.Option{redlock.WithNodeTimeout(200 * time.Millisecond), redlock.WithTTL(time.Second)}
	l := locktest.NewT(t, clients, append(opts, redlock.WithObserver(tm.obs))...)
	other := locktest.NewT(t, clients, opts...)
	ctx := t.Context()

	// Obtain, extend, release.
	lock, err := l.TryObtain(ctx, "otel:basic")
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Extend(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Contention, then a wait until the holder's key expires.
	if _, err := other.TryObtain(ctx, "otel:busy"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtain(ctx, "otel:busy"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryObtain of a held key: %v", err)
	}
	waited, err := l.Obtain(ctx, "otel:busy")
	if err != nil {
		t.Fatal(err)
	}
	if err := waited.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A loss: the key is force-released and taken while Do runs.
	err = l.Do(ctx, "otel:loss", func(ctx context.Context) error {
		if err := other.ForceRelease(ctx, "otel:loss"); err != nil {
			return err
		}
		if _, err := other.TryObtain(ctx, "otel:loss"); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v, want ErrLockLost", err)
	}

	// Abstentions: the restart guard on nodes that were never seeded.
	guarded := locktest.NewT(t, clients, append(opts, redlock.WithObserver(tm.obs), redlock.WithRestartGuard(10*time.Second))...)
	if _, err := guarded.TryObtain(ctx, "otel:guard"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("TryObtain on unseeded guarded nodes: %v", err)
	}

	// A dead node.
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtain(ctx, "otel:dead"); err != nil {
		t.Fatal(err)
	}

	checks := []struct {
		name   string
		labels map[string]string
		min    float64
		minSum float64
	}{
		{"redlock_operation_duration_seconds", map[string]string{"redlock_op": "obtain", "redlock_outcome": "ok"}, 4, 0},
		{"redlock_operation_duration_seconds", map[string]string{"redlock_op": "obtain", "redlock_outcome": "not_obtained"}, 1, 0},
		{"redlock_operation_duration_seconds", map[string]string{"redlock_op": "obtain", "redlock_outcome": "no_quorum"}, 1, 0},
		{"redlock_operation_duration_seconds", map[string]string{"redlock_op": "release", "redlock_outcome": "ok"}, 2, 0},
		{"redlock_operation_duration_seconds", map[string]string{"redlock_op": "extend", "redlock_outcome": "ok"}, 1, 0},
		// The waiter waited for most of the holder's one-second TTL.
		{"redlock_obtain_wait_seconds", map[string]string{"redlock_outcome": "ok"}, 4, 0.5},
		{"redlock_waits_seconds", nil, 1, 0.5},
		{"redlock_hold_duration_seconds", nil, 2, 0},
		{"redlock_losses_total", map[string]string{"redlock_loss_reason": "lost"}, 1, 0},
		// Two abstentions decide the round; the third node may be
		// killed below before it answers.
		{"redlock_abstentions_total", nil, 2, 0},
		// Node 0 granted otel:basic, otel:loss and otel:dead; otel:busy's
		// last round may have found the holder's key still there.
		{"redlock_node_outcomes_total", map[string]string{"redlock_op": "obtain", "redlock_node": servers[0].Addr, "redlock_node_outcome": "ok"}, 3, 0},
		{"redlock_node_outcomes_total", map[string]string{"redlock_op": "obtain", "redlock_node_outcome": "held_by_other"}, 2, 0},
		{"redlock_node_outcomes_total", map[string]string{"redlock_op": "obtain", "redlock_node_outcome": "abstained"}, 2, 0},
		{"redlock_node_outcomes_total", map[string]string{"redlock_op": "release", "redlock_node_outcome": "ok"}, 2, 0},
		{"redlock_node_outcomes_total", map[string]string{"redlock_op": "extend", "redlock_node_outcome": "ok"}, 2, 0},
		{"redlock_node_duration_seconds", map[string]string{"redlock_op": "obtain", "redlock_node": servers[2].Addr, "redlock_node_outcome": "error"}, 1, 0},
	}
	// A node that answers after its round was decided is counted when it
	// does: scrape until every check holds, or for 10s.
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams := tm.scrape(t)
		var failed []string
		for _, c := range checks {
			n, sum, found := sample(fams, c.name, c.labels)
			if !found || n < c.min || sum < c.minSum {
				failed = append(failed, fmt.Sprintf("%s%v: count %v, sum %v; want count >= %v, sum >= %v", c.name, c.labels, n, sum, c.min, c.minSum))
			}
		}
		if len(failed) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("scraped for 10s:\n%s", strings.Join(failed, "\n"))
		}
		time.Sleep(10 * time.Millisecond) // nothing to await: metrics are read by scraping
	}
}

// The spans of Obtain, Extend and Release are children of the caller's
// span, carry the key and outcome, and one event per node answer with the
// node's address; a failed Obtain's span has an error status and every
// node's answer that decided it.
func TestSpans(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	clients := redistest.ClientsT(t, servers)
	tm := newTelemetry(t)
	l := locktest.NewT(t, clients, redlock.WithObserver(tm.obs), redlock.WithNodeTimeout(time.Second), redlock.WithTTL(5*time.Second))
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, parent := tm.tp.Tracer("test").Start(t.Context(), "job")
	lock, err := l.TryObtain(ctx, "otel:span")
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// With two nodes down, the round is decided only by their answers.
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtain(ctx, "otel:down"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("TryObtain with two of three nodes down: %v", err)
	}
	parent.End()

	got := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range tm.spans.Ended() {
		if s.Name() != "redlock.Obtain" || attrMap(s.Attributes())["redlock.key"] == "otel:span" {
			got[s.Name()] = s
		} else {
			got["failed"] = s
		}
	}
	for _, name := range []string{"redlock.Obtain", "redlock.Extend", "redlock.Release", "failed"} {
		s := got[name]
		if s == nil {
			t.Errorf("no %s span among %v", name, spanNames(tm.spans.Ended()))
			continue
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s: parent %v, want the caller's span", name, s.Parent().SpanID())
		}
		attrs := attrMap(s.Attributes())
		wantKey, wantOutcome := "otel:span", "ok"
		if name == "failed" {
			wantKey, wantOutcome = "otel:down", "no_quorum"
			if s.Status().Code != codes.Error {
				t.Errorf("failed obtain: status %v, want an error", s.Status())
			}
		}
		if attrs["redlock.key"] != wantKey || attrs["redlock.outcome"] != wantOutcome {
			t.Errorf("%s attributes %v, want key %s and outcome %s", name, attrs, wantKey, wantOutcome)
		}
		// A node whose answer came after the majority's decision, and so
		// after the span ended, is missing from the span.
		var ok, failed int
		for _, ev := range s.Events() {
			if ev.Name != "redlock.node" {
				continue
			}
			a := attrMap(ev.Attributes)
			switch {
			case a["redlock.node.outcome"] == "ok" && a["server.address"] == "127.0.0.1" && a["server.port"] != "" &&
				(a["redlock.node.index"] == "0" || name != "failed" && a["redlock.node.index"] == "2"):
				ok++
			case a["redlock.node.outcome"] == "error" && a["error.message"] != "" && (a["redlock.node.index"] == "1" || name == "failed" && a["redlock.node.index"] == "2"):
				failed++
			default:
				t.Errorf("%s: node event %v", name, a)
			}
		}
		if name == "failed" {
			if failed != 2 {
				t.Errorf("failed obtain: %d failed node events, want the two dead nodes'", failed)
			}
		} else if ok < 2 || failed > 1 {
			t.Errorf("%s: %d ok and %d failed node events, want the 2 live nodes' and at most the dead one's", name, ok, failed)
		}
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// Outcome tells every sentinel apart.
func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{redlock.ErrNotObtained, "not_obtained"},
		{errors.Join(redlock.ErrNoQuorum, context.DeadlineExceeded), "no_quorum"},
		{redlock.ErrLockLost, "lost"},
		{redlock.ErrLockExpired, "expired"},
		{redlock.ErrReleased, "released"},
		{redlock.ErrInvalid, "invalid"},
		{redlock.ErrClosed, "closed"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{errors.New("x"), "error"},
	} {
		if got := redlockotel.Outcome(c.err); got != c.want {
			t.Errorf("Outcome(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
