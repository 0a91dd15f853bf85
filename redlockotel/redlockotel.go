// Package redlockotel reports what a redlock.Locker does to OpenTelemetry,
// as metrics and spans, the way go-redis's redisotel does for a Redis
// client. It is a module of its own, so that the library itself depends on
// no telemetry code.
//
//	obs, err := redlockotel.NewObserver() // the global providers, or WithMeterProvider, WithTracerProvider
//	...
//	locker, err := redlock.New(clients, redlock.WithObserver(obs))
//
// Metrics (attribute names in parentheses):
//
//	redlock.operation.duration  histogram, s    obtain, release and extend latency (redlock.op, redlock.outcome)
//	redlock.obtain.wait         histogram, s    the part of an obtain spent waiting for the lock (redlock.outcome)
//	redlock.hold.duration       histogram, s    from the end of an obtain to the start of its release (redlock.outcome of the release)
//	redlock.node.duration       histogram, s    each node's answer (redlock.op, redlock.node, redlock.node.outcome)
//	redlock.node.outcomes       counter         each node's answer, by outcome (the same attributes)
//	redlock.abstentions         counter         a node's refusal to vote under the restart guard (redlock.node)
//	redlock.losses              counter         a loss signalled to the work by KeepAlive or Do (redlock.loss.reason)
//	redlock.waits               histogram, s    each sleep of Obtain between two attempts
//
// redlock.outcome is one of ok, not_obtained, no_quorum, expired, lost,
// released, invalid, closed, canceled, deadline_exceeded and error (see
// Outcome); redlock.node.outcome one of ok, held_by_other, missing, error
// and abstained; redlock.node is the node's address. Lock keys are not
// metric attributes (there may be many); they are span attributes.
//
// Spans: redlock.Obtain, redlock.Release and redlock.Extend, children of
// the span in the caller's context, with the key, the outcome (an error
// status on failure), and one redlock.node event per node answer
// (server.address, server.port, redlock.node.index, redlock.node.outcome,
// redlock.node.latency_ms, the error), plus redlock.wait events for the
// sleeps of Obtain. A node that answers after its span ended is counted in
// the metrics only. A loss adds a redlock.lost event to the span of the
// context given to KeepAlive or Do.
package redlockotel

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/redlock/redlock"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/quorumlock/redlock/redlockotel"

// Attribute keys.
const (
	AttrOp          = attribute.Key("redlock.op")
	AttrOutcome     = attribute.Key("redlock.outcome")
	AttrKey         = attribute.Key("redlock.key")
	AttrNode        = attribute.Key("redlock.node")
	AttrNodeIndex   = attribute.Key("redlock.node.index")
	AttrNodeOutcome = attribute.Key("redlock.node.outcome")
	AttrLossReason  = attribute.Key("redlock.loss.reason")
)

// Option configures NewObserver.
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets where the metrics go. Default: the global
// provider (otel.GetMeterProvider) at the time of NewObserver.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets where the spans go. Default: the global provider
// (otel.GetTracerProvider) at the time of NewObserver.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// Observer is a redlock.Observer that records metrics and spans. It is safe
// for concurrent use and never blocks beyond what the OpenTelemetry SDK
// does to record a measurement or a span event.
type Observer struct {
	tracer trace.Tracer

	opDuration   metric.Float64Histogram
	obtainWait   metric.Float64Histogram
	hold         metric.Float64Histogram
	nodeDuration metric.Float64Histogram
	nodeOutcomes metric.Int64Counter
	abstentions  metric.Int64Counter
	losses       metric.Int64Counter
	waits        metric.Float64Histogram
}

var _ redlock.Observer = (*Observer)(nil)

// NewObserver returns an Observer that records to the given providers (the
// global ones by default). It fails if a provider refuses to create an
// instrument, or a provider given is nil.
func NewObserver(opts ...Option) (*Observer, error) {
	c := config{mp: otel.GetMeterProvider(), tp: otel.GetTracerProvider()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.mp == nil || c.tp == nil {
		return nil, errors.New("redlockotel: nil meter or tracer provider")
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{tracer: c.tp.Tracer(ScopeName)}
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300))
		errs = append(errs, err)
		return h
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	o.opDuration = hist("redlock.operation.duration", "Latency of lock operations (obtain, release, extend), waiting included.")
	o.obtainWait = hist("redlock.obtain.wait", "Time an obtain spent waiting for the lock rather than asking the nodes.")
	o.hold = hist("redlock.hold.duration", "Time a lock was held, from the end of its acquisition to the start of its release.")
	o.nodeDuration = hist("redlock.node.duration", "Latency of each node's answer in a lock round.")
	o.waits = hist("redlock.waits", "Each sleep of an obtain between two attempts.")
	o.nodeOutcomes = count("redlock.node.outcomes", "{answer}", "Node answers in lock rounds, by outcome.")
	o.abstentions = count("redlock.abstentions", "{abstention}", "Refusals to vote by nodes under the restart guard.")
	o.losses = count("redlock.losses", "{loss}", "Locks whose loss KeepAlive or Do signalled to the work.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// Outcome names an operation's outcome from its error, as the
// redlock.outcome attribute shows it.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redlock.ErrInvalid):
		return "invalid"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	case errors.Is(err, redlock.ErrNotObtained):
		return "not_obtained"
	case errors.Is(err, redlock.ErrNoQuorum):
		return "no_quorum"
	case errors.Is(err, redlock.ErrReleased):
		return "released"
	case errors.Is(err, redlock.ErrLockLost):
		return "lost"
	case errors.Is(err, redlock.ErrLockExpired):
		return "expired"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "error"
}

// nodeOutcome names a node's answer as redlock.node.outcome shows it.
func nodeOutcome(e redlock.NodeEvent) string {
	if e.Abstained {
		return "abstained"
	}
	switch e.Outcome {
	case redlock.OutcomeOK:
		return "ok"
	case redlock.OutcomeHeldByOther:
		return "held_by_other"
	case redlock.OutcomeMissing:
		return "missing"
	}
	return "error"
}

var spanNames = map[redlock.Op]string{
	redlock.OpObtain:  "redlock.Obtain",
	redlock.OpRelease: "redlock.Release",
	redlock.OpExtend:  "redlock.Extend",
	// An operator broke a lock: worth a span of its own in a trace.
	redlock.OpForceRelease: "redlock.ForceRelease",
}

// OpStart starts the operation's span.
func (o *Observer) OpStart(ctx context.Context, op redlock.Op, key string) context.Context {
	name, ok := spanNames[op]
	if !ok {
		name = "redlock." + string(op)
	}
	ctx, _ = o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrOp.String(string(op)), AttrKey.String(key)))
	return ctx
}

// OpDone records the operation's metrics and ends its span.
func (o *Observer) OpDone(ctx context.Context, e redlock.OpEvent) {
	outcome := Outcome(e.Err)
	attrs := metric.WithAttributeSet(attribute.NewSet(AttrOp.String(string(e.Op)), AttrOutcome.String(outcome)))
	o.opDuration.Record(ctx, e.Latency.Seconds(), attrs)
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(AttrOutcome.String(outcome))
	switch e.Op {
	case redlock.OpObtain:
		o.obtainWait.Record(ctx, e.Wait.Seconds(), metric.WithAttributeSet(attribute.NewSet(AttrOutcome.String(outcome))))
		span.SetAttributes(attribute.Int("redlock.attempts", e.Attempts), attribute.Float64("redlock.wait_ms", ms(e.Wait)))
		if e.Fence != 0 {
			span.SetAttributes(attribute.String("redlock.fence", strconv.FormatUint(e.Fence, 10)))
		}
	case redlock.OpRelease:
		if e.Held > 0 {
			o.hold.Record(ctx, e.Held.Seconds(), metric.WithAttributeSet(attribute.NewSet(AttrOutcome.String(outcome))))
			span.SetAttributes(attribute.Float64("redlock.held_ms", ms(e.Held)))
		}
	}
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// Waited records one sleep of Obtain.
func (o *Observer) Waited(ctx context.Context, e redlock.WaitEvent) {
	o.waits.Record(ctx, e.Duration.Seconds())
	trace.SpanFromContext(ctx).AddEvent("redlock.wait", trace.WithTimestamp(e.Start),
		trace.WithAttributes(attribute.Float64("redlock.wait_ms", ms(e.Duration))))
}

// NodeDone records one node's answer, and adds it to the operation's span.
func (o *Observer) NodeDone(ctx context.Context, e redlock.NodeEvent) {
	outcome := nodeOutcome(e)
	set := attribute.NewSet(AttrOp.String(string(e.Op)), AttrNode.String(e.Addr), AttrNodeOutcome.String(outcome))
	o.nodeDuration.Record(ctx, e.Latency.Seconds(), metric.WithAttributeSet(set))
	o.nodeOutcomes.Add(ctx, 1, metric.WithAttributeSet(set))
	if e.Abstained {
		o.abstentions.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(AttrNode.String(e.Addr))))
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		AttrNodeIndex.Int(e.Node),
		AttrNodeOutcome.String(outcome),
		attribute.Float64("redlock.node.latency_ms", ms(e.Latency)),
	}
	if host, port, err := net.SplitHostPort(e.Addr); err == nil {
		attrs = append(attrs, attribute.String("server.address", host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int("server.port", p))
		}
	} else {
		attrs = append(attrs, attribute.String("server.address", e.Addr))
	}
	if e.Op != redlock.OpObtain && e.Op != redlock.OpRelease && e.Op != redlock.OpExtend {
		attrs = append(attrs, AttrOp.String(string(e.Op)))
	}
	if e.Err != nil {
		attrs = append(attrs, attribute.String("error.message", e.Err.Error()))
	}
	span.AddEvent("redlock.node", trace.WithAttributes(attrs...))
}

// Lost counts a loss and adds it to the span of the work's context.
func (o *Observer) Lost(ctx context.Context, e redlock.LossEvent) {
	reason := "lost"
	if errors.Is(e.Cause, redlock.ErrLockExpired) {
		reason = "expired"
	}
	o.losses.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(AttrLossReason.String(reason))))
	trace.SpanFromContext(ctx).AddEvent("redlock.lost", trace.WithAttributes(
		AttrKey.String(e.Key), AttrLossReason.String(reason),
		attribute.Float64("redlock.left_ms", ms(e.Left)),
		attribute.String("error.message", e.Cause.Error())))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
