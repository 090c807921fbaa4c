// Package metrics gives the program its OpenTelemetry metrics
// (docs/tracing.md, "Metrics"): the instruments the processor, the
// publisher and AutoReplay record, named after the semantic conventions
// where they exist, exported over OTLP/HTTP where the standard
// OTEL_EXPORTER_OTLP_* settings point. With none set, Setup returns a nil
// *Recorder: every method of a nil Recorder, Consumer or Publisher returns
// at once, so that metrics off cost a nil check and nothing else (no meter
// provider, no exporter, no goroutine, no allocation).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// ScopeName is the instrumentation scope of the program's instruments (the
// same as its spans').
const ScopeName = "github.com/convoy-dev/convoy"

// Instrument names: the messaging semantic conventions' where they define
// one, the program's own under convoy.
const (
	ProcessDuration  = "messaging.process.duration"         // histogram, s
	ConsumedMessages = "messaging.client.consumed.messages" // counter, {message}
	SentMessages     = "messaging.client.sent.messages"     // counter, {message}
	OrderMessages    = "convoy.order.messages"              // counter, {message}, by convoy.outcome
	CriticalTime     = "convoy.order.critical_time"         // histogram, s
	Ledgers          = "convoy.ledgers"                     // counter, {ledger}, by convoy.outcome
	AutoReplays      = "convoy.auto_replay.orders"          // counter, {order}, by convoy.outcome
	BlockedOrders    = "convoy.orders.blocked"              // gauge, {order}
	ParkedMessages   = "convoy.messages.parked"             // gauge, {message}
	DeadLetters      = "convoy.dead_letters"                // gauge, {message}, by convoy.cause
	LagOrders        = "convoy.orders.lag"                  // gauge, {order}, by convoy.lag.status
)

// Attribute keys of the program's own.
const (
	AttrOutcome   = "convoy.outcome"
	AttrCause     = "convoy.cause"
	AttrLagStatus = "convoy.lag.status"
	// AttrDomain names the domain ("orders", "accounts") of AutoReplay's
	// figures: each domain's run sets its own.
	AttrDomain = "convoy.domain"
)

// durationBuckets are the explicit bucket boundaries (s) the messaging
// conventions give their duration histograms.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// criticalBuckets (s): a critical time is the wait behind a backlog, or
// behind a gap an operator closes, so from milliseconds to hours.
var criticalBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600}

// Config is what Setup read from the environment.
type Config struct {
	Enabled  bool   // an exporter was built
	Endpoint string // the setting that enabled it, for the startup line
}

// Setup builds the program's instruments from the standard OpenTelemetry
// settings read with getenv (os.Getenv when nil), as tracing.Setup does for
// spans:
//
//   - OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (as is) or
//     OTEL_EXPORTER_OTLP_ENDPOINT (with /v1/metrics appended) set: an
//     OTLP/HTTP (protobuf) exporter behind a periodic reader
//     (OTEL_METRIC_EXPORT_INTERVAL, default 60 s; OTEL_METRIC_EXPORT_TIMEOUT);
//     the exporter reads the other OTEL_EXPORTER_OTLP_* settings (headers,
//     timeout, compression, certificates) itself;
//   - OTEL_METRICS_EXPORTER=none, no endpoint, or OTEL_SDK_DISABLED=true:
//     nothing is built, the Recorder is nil and shutdown does nothing
//     (an instrument with no reader is never read: unlike spans, which
//     carry their ids into the log lines, a measurement nobody exports is
//     worth nothing).
//
// A protocol other than http/protobuf or an exporter other than otlp is
// refused, naming the setting. shutdown exports what was recorded since the
// last export.
func Setup(ctx context.Context, getenv func(string) string) (r *Recorder, cfg Config, shutdown func(context.Context) error, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	shutdown = func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, cfg, shutdown, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_METRICS_EXPORTER")); exp {
	case "none":
		return nil, cfg, shutdown, nil
	case "", "otlp":
	default:
		return nil, cfg, shutdown, fmt.Errorf("setting OTEL_METRICS_EXPORTER=%q: only otlp (over HTTP) or none is supported", exp)
	}
	var url string
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")); v != "" {
		cfg.Endpoint, url = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="+v, v
	} else if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
		cfg.Endpoint, url = "OTEL_EXPORTER_OTLP_ENDPOINT="+v, strings.TrimSuffix(v, "/")+"/v1/metrics"
	}
	if url == "" {
		return nil, cfg, shutdown, nil
	}
	for _, key := range []string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			if v != "http/protobuf" {
				return nil, cfg, shutdown, fmt.Errorf("setting %s=%q: only http/protobuf is supported", key, v)
			}
			break
		}
	}
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(url))
	if err != nil {
		return nil, cfg, shutdown, fmt.Errorf("OTLP metric exporter (%s): %w", cfg.Endpoint, err)
	}
	var opts []sdkmetric.PeriodicReaderOption
	for key, opt := range map[string]func(time.Duration) sdkmetric.PeriodicReaderOption{
		"OTEL_METRIC_EXPORT_INTERVAL": sdkmetric.WithInterval, "OTEL_METRIC_EXPORT_TIMEOUT": sdkmetric.WithTimeout,
	} {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			ms, perr := strconv.Atoi(v)
			if perr != nil || ms <= 0 {
				return nil, cfg, shutdown, fmt.Errorf("setting %s=%q: not a number of milliseconds above 0", key, v)
			}
			opts = append(opts, opt(time.Duration(ms)*time.Millisecond))
		}
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, opts...)),
		sdkmetric.WithResource(serviceResource(getenv)))
	r, err = newRecorder(mp)
	if err != nil {
		_ = mp.Shutdown(ctx)
		return nil, cfg, shutdown, err
	}
	cfg.Enabled = true
	return r, cfg, func(ctx context.Context) error {
		return errors.Join(mp.ForceFlush(ctx), mp.Shutdown(ctx))
	}, nil
}

func serviceResource(getenv func(string) string) *resource.Resource {
	name := "convoy"
	for _, key := range []string{"OTEL_SERVICE_NAME", "WEBSITE_SITE_NAME"} {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			name = v
			break
		}
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return resource.Default()
	}
	return res
}

// Recorder holds the program's instruments; nil when metrics are off.
type Recorder struct {
	processDuration metric.Float64Histogram
	consumed        metric.Int64Counter
	sent            metric.Int64Counter
	outcomes        metric.Int64Counter
	critical        metric.Float64Histogram
	ledgers         metric.Int64Counter
	replays         metric.Int64Counter
	// figures are each domain's last figures, by domain (copied on write).
	figures atomic.Pointer[map[string]Figures]
	setMu   sync.Mutex // serializes SetFigures' copies
}

// NewRecorder makes the instruments with mp's meter: for tests that read
// them with a reader of their own.
func NewRecorder(mp metric.MeterProvider) (*Recorder, error) { return newRecorder(mp) }

func newRecorder(mp metric.MeterProvider) (*Recorder, error) {
	m := mp.Meter(ScopeName)
	r := &Recorder{}
	var errs [11]error
	r.processDuration, errs[0] = m.Float64Histogram(ProcessDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of processing operation."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	r.consumed, errs[1] = m.Int64Counter(ConsumedMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Number of messages that were delivered to the application."))
	r.sent, errs[2] = m.Int64Counter(SentMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Number of messages producer attempted to send to the broker."))
	r.outcomes, errs[3] = m.Int64Counter(OrderMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Order messages the processor settled, by outcome (applied, parked, duplicate, rejected)."))
	r.critical, errs[4] = m.Float64Histogram(CriticalTime, metric.WithUnit("s"),
		metric.WithDescription("From when an order message was enqueued to when its transaction was applied."),
		metric.WithExplicitBucketBoundaries(criticalBuckets...))
	r.ledgers, errs[5] = m.Int64Counter(Ledgers, metric.WithUnit("{ledger}"),
		metric.WithDescription("Ledgers the publisher handled, by outcome."))
	r.replays, errs[6] = m.Int64Counter(AutoReplays, metric.WithUnit("{order}"),
		metric.WithDescription("Orders AutoReplay replayed, or failed to, by outcome (replayed, failed)."))
	_, errs[7] = m.Int64ObservableGauge(BlockedOrders, metric.WithUnit("{order}"),
		metric.WithDescription("Blocked orders, as the last AutoReplay run of this instance counted them."),
		metric.WithInt64Callback(r.observe(func(f *Figures, o metric.Int64Observer, d attribute.KeyValue) {
			o.Observe(f.BlockedOrders, metric.WithAttributes(d))
		})))
	_, errs[8] = m.Int64ObservableGauge(ParkedMessages, metric.WithUnit("{message}"),
		metric.WithDescription("Messages parked behind a gap, as the last AutoReplay run of this instance counted them."),
		metric.WithInt64Callback(r.observe(func(f *Figures, o metric.Int64Observer, d attribute.KeyValue) {
			o.Observe(f.ParkedMessages, metric.WithAttributes(d))
		})))
	_, errs[9] = m.Int64ObservableGauge(DeadLetters, metric.WithUnit("{message}"),
		metric.WithDescription("Dead letters of the orders queue by cause (transient, permanent), as the last AutoReplay run of this instance read them."),
		metric.WithInt64Callback(r.observe(func(f *Figures, o metric.Int64Observer, d attribute.KeyValue) {
			if f.DeadLettersRead {
				o.Observe(f.DeadLettersTransient, metric.WithAttributes(d, attribute.String(AttrCause, "transient")))
				o.Observe(f.DeadLettersPermanent, metric.WithAttributes(d, attribute.String(AttrCause, "permanent")))
			}
		})))
	_, errs[10] = m.Int64ObservableGauge(LagOrders, metric.WithUnit("{order}"),
		metric.WithDescription("Active orders by lag status (ok, catching-up, stalled, blocked), as the last AutoReplay run of this instance surveyed them."),
		metric.WithInt64Callback(r.observe(func(f *Figures, o metric.Int64Observer, d attribute.KeyValue) {
			for _, s := range f.Lag {
				o.Observe(s.Orders, metric.WithAttributes(d, attribute.String(AttrLagStatus, s.Status)))
			}
		})))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("OpenTelemetry instruments: %w", err)
	}
	return r, nil
}

// observe calls fn with each domain's figures and its attribute.
func (r *Recorder) observe(fn func(*Figures, metric.Int64Observer, attribute.KeyValue)) metric.Int64Callback {
	return func(_ context.Context, o metric.Int64Observer) error {
		all := r.figures.Load()
		if all == nil {
			return nil
		}
		for _, d := range slices.Sorted(maps.Keys(*all)) {
			f := (*all)[d]
			fn(&f, o, attribute.String(AttrDomain, d))
		}
		return nil
	}
}

// Figures are the gauges' values: the last AutoReplay run's summary of one
// domain.
type Figures struct {
	Domain                        string // its Name: the gauges' convoy.domain
	BlockedOrders, ParkedMessages int64
	// DeadLettersRead: the run read the dead-letter sub-queue (else the
	// dead-letter gauge reports nothing).
	DeadLettersRead                            bool
	DeadLettersTransient, DeadLettersPermanent int64
	Lag                                        []LagCount // by status; none before a survey
}

// LagCount is the number of active orders of one lag status.
type LagCount struct {
	Status string
	Orders int64
}

// SetFigures makes f what the gauges report of f.Domain from now on.
func (r *Recorder) SetFigures(f Figures) {
	if r == nil {
		return
	}
	r.setFigures(f) // f itself does not escape: a nil Recorder's call allocates nothing
}

func (r *Recorder) setFigures(f Figures) {
	r.setMu.Lock()
	defer r.setMu.Unlock()
	all := map[string]Figures{}
	if old := r.figures.Load(); old != nil {
		maps.Copy(all, *old)
	}
	all[f.Domain] = f
	r.figures.Store(&all)
}

// AutoReplayed counts the keys of domain AutoReplay replayed (outcome
// "replayed") or failed to ("failed").
func (r *Recorder) AutoReplayed(ctx context.Context, domain, outcome string, keys int) {
	if r == nil || keys == 0 {
		return
	}
	r.replays.Add(ctx, int64(keys), metric.WithAttributes(attribute.String(AttrDomain, domain), attribute.String(AttrOutcome, outcome)))
}

// Consumer records what one function does with the messages of one queue.
type Consumer struct {
	r        *Recorder
	base     []attribute.KeyValue // of every point (NewSet sorts what it is given: never passed to it)
	queue    attribute.KeyValue
	function attribute.KeyValue
	okRecord metric.RecordOption
	okAdd    metric.AddOption
	crit     metric.RecordOption
	outcomes sync.Map // outcome → metric.AddOption
}

// Consumer is the recorder of function's invocations, triggered by queue's
// messages; nil when r is.
func (r *Recorder) Consumer(function, queue string) *Consumer {
	if r == nil {
		return nil
	}
	q, fn := attribute.String("messaging.destination.name", queue), attribute.String("faas.name", function)
	base := []attribute.KeyValue{
		attribute.String("messaging.system", "servicebus"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.operation.type", "process"),
		q, fn,
		attribute.String("faas.trigger", "pubsub"),
	}
	set := attribute.NewSet(slices.Clone(base)...)
	return &Consumer{r: r, base: base, queue: q, function: fn, okRecord: metric.WithAttributeSet(set), okAdd: metric.WithAttributeSet(set),
		crit: metric.WithAttributeSet(attribute.NewSet(q, fn))}
}

// Processed records one invocation that processed messages in d; errorType
// is "" when it succeeded, else the class of its error (error.type).
func (c *Consumer) Processed(ctx context.Context, messages int, d time.Duration, errorType string) {
	if c == nil {
		return
	}
	rec, add := c.okRecord, c.okAdd
	if errorType != "" {
		set := attribute.NewSet(append(slices.Clone(c.base), attribute.String("error.type", errorType))...)
		rec, add = metric.WithAttributeSet(set), metric.WithAttributeSet(set)
	}
	c.r.processDuration.Record(ctx, d.Seconds(), rec)
	if messages > 0 {
		c.r.consumed.Add(ctx, int64(messages), add)
	}
}

// Outcome counts a message settled with outcome (convoy.order.messages).
func (c *Consumer) Outcome(ctx context.Context, outcome string) {
	if c == nil {
		return
	}
	opt, ok := c.outcomes.Load(outcome)
	if !ok {
		opt, _ = c.outcomes.LoadOrStore(outcome, metric.AddOption(metric.WithAttributeSet(attribute.NewSet(
			c.queue, c.function, attribute.String(AttrOutcome, outcome)))))
	}
	c.r.outcomes.Add(ctx, 1, opt.(metric.AddOption))
}

// CriticalTime records an applied transaction's critical time.
func (c *Consumer) CriticalTime(ctx context.Context, d time.Duration) {
	if c == nil {
		return
	}
	c.r.critical.Record(ctx, d.Seconds(), c.crit)
}

// Publisher records what a publishing function sends to the queues of
// the domains.
type Publisher struct {
	r    *Recorder
	fn   attribute.KeyValue
	sent map[string]metric.AddOption // by queue
}

// Publisher is the recorder of function's ledgers, whose messages go to
// queues; nil when r is.
func (r *Recorder) Publisher(function string, queues ...string) *Publisher {
	if r == nil {
		return nil
	}
	p := &Publisher{r: r, fn: attribute.String("faas.name", function), sent: map[string]metric.AddOption{}}
	for _, q := range queues {
		p.sent[q] = metric.WithAttributeSet(attribute.NewSet(
			attribute.String("messaging.system", "servicebus"),
			attribute.String("messaging.operation.name", "send"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", q),
			attribute.String("faas.name", function)))
	}
	return p
}

// Ledger records one ledger handled with outcome, and the messages its
// publishing sent, by queue (one of the Publisher's queues).
func (p *Publisher) Ledger(ctx context.Context, outcome string, sent map[string]int) {
	if p == nil {
		return
	}
	p.r.ledgers.Add(ctx, 1, metric.WithAttributes(p.fn, attribute.String(AttrOutcome, outcome)))
	for q, n := range sent {
		if opt, ok := p.sent[q]; ok && n > 0 {
			p.r.sent.Add(ctx, int64(n), opt)
		}
	}
}
