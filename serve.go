package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/metrics"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/settings"
	"github.com/convoy-dev/convoy/handler/tablestore"
	"github.com/convoy-dev/convoy/handler/tracing"
)

func serve() error {
	cfg, err := settings.Load(os.LookupEnv)
	if err != nil {
		return fmt.Errorf("invalid settings:\n%w", err)
	}
	log := handler.NewLogger(cfg.LogFormat, cfg.LogLevel, os.Stdout, os.Stderr)
	traces, flushTracing, err := startTracing(func(err error) { log.Warn("spans not exported at shutdown", "error", err) })
	if err != nil {
		return err
	}
	defer flushTracing()
	if traces.Enabled {
		log.Info("exporting traces over OTLP/HTTP", "setting", traces.Endpoint)
	} else if traces.Recording {
		log.Info("making spans, exporting none (OTEL_TRACES_EXPORTER=none)")
	}
	meters, metricsCfg, flushMetrics, err := startMetrics(func(err error) { log.Warn("metrics not exported at shutdown", "error", err) })
	if err != nil {
		return err
	}
	defer flushMetrics()
	if metricsCfg.Enabled {
		log.Info("exporting metrics over OTLP/HTTP", "setting", metricsCfg.Endpoint)
	}
	if traces.Enabled || metricsCfg.Enabled {
		// An export that fails (the receiver down) is a warning in our log,
		// not a bare line on stderr; what it held is dropped, nothing waits.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			if strings.Contains(err.Error(), "metric") {
				log.Warn("metrics export failed", "error", err)
				return
			}
			log.Warn("trace export failed", "error", err)
		}))
	}
	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	defer c.close()
	e, err := newServer(cfg, c, log, meters)
	if err != nil {
		return err
	}

	// 127.0.0.1 only: the host always calls http://127.0.0.1:PORT.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("custom handler listening", "addr", ln.Addr().String(), "domains", domainList(cfg))

	var sig os.Signal
	select {
	case err := <-done:
		return err
	case sig = <-signals:
	}
	log.Info("shutting down: finishing in-flight invocations", "timeout", cfg.ShutdownTimeout.String())
	shutdown, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("in-flight invocations did not finish within %s: %w", cfg.ShutdownTimeout, err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	stop := signalStop{sig}
	log.Info("stopped: in-flight invocations finished", "signal", sig.String(), "exitCode", stop.code())
	return stop
}

// domainList names each domain with its queue and table, for the log.
func domainList(cfg settings.Settings) string {
	var b strings.Builder
	for i, d := range cfg.Domains {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (queue %s, table %s)", d.Name(), d.Queue, d.Table)
	}
	return b.String()
}

// startTracing installs tracing from the standard OTEL_* settings of the
// environment (docs/tracing.md: with no endpoint, no exporter is built);
// flush, deferred, exports the spans left (5 s at most), reporting a
// failure to warn.
func startTracing(warn func(error)) (cfg tracing.Config, flush func(), err error) {
	cfg, stop, err := tracing.Setup(context.Background(), os.Getenv)
	if err != nil {
		return cfg, nil, fmt.Errorf("invalid settings:\n%w", err)
	}
	return cfg, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			warn(err)
		}
	}, nil
}

// startMetrics builds the OpenTelemetry instruments from the standard
// OTEL_* settings of the environment (docs/tracing.md, "Metrics": with no
// endpoint, nothing is built and the recorder is nil); flush, deferred,
// exports what was recorded since the last export (5 s at most), reporting
// a failure to warn.
func startMetrics(warn func(error)) (r *metrics.Recorder, cfg metrics.Config, flush func(), err error) {
	r, cfg, stop, err := metrics.Setup(context.Background(), os.Getenv)
	if err != nil {
		return nil, cfg, nil, fmt.Errorf("invalid settings:\n%w", err)
	}
	return r, cfg, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			warn(err)
		}
	}, nil
}

// newServer is the custom handler's echo server on clients c: for every
// registered domain, its processor, replay and automatic replay on its own
// table and queue; the publisher, which routes each ledger entry to its
// domain's queue.
//
// Each domain's table has two stores, one per kind of caller (their
// retries are tablestore.ProcessorRetry and OperatorRetry): the
// processor's (and so the skip's, a commit of the processor under its lock,
// bounded by SkipDeadline), and operators' (the status page, the blocked
// list, HealthSummary, the replays and AutoReplay), whose requests fail
// fast when storage hangs.
func newServer(cfg settings.Settings, c *clients, log *slog.Logger, meters *metrics.Recorder) (*echo.Echo, error) {
	publisher, err := c.publisher(cfg, nil)
	if err != nil {
		return nil, err
	}
	deps := handler.Deps{Ledgers: publisher, Logger: log, MaxRequestBytes: cfg.MaxRequestBytes,
		LagWindow: cfg.LagWindow, Metrics: meters, LedgersQueue: cfg.LedgersQueue}
	for _, d := range cfg.Domains {
		deps.Domains = append(deps.Domains, servedDomain(cfg, c, d))
	}
	return handler.New(deps), nil
}

// servedDomain is domain d as the server serves it. AutoReplay surveys
// every domain in each run: the budgets a run spends (AutoReplayMaxOrders,
// AutoReplayBlockedPerRun, LagSurveyOrdersPerRun, ReplayScanLimit) are
// split between the domains, so that a second domain does not double a
// run's requests beyond the settings (the domains' runs go at once, each
// until the invocation's deadline: handler.AutoReplayDeadline).
func servedDomain(cfg settings.Settings, c *clients, d settings.Domain) handler.Domain {
	store := c.orderStore(d.Table)
	processor := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: d.Rules,
		CacheSize: cfg.OrderCacheSize,
		Retry:     fault.RetryPolicy{MaxElapsed: cfg.RetryBudget},
		Index:     store,
		LagWindow: cfg.LagWindow,
		// Every key it receives, whoever sent it, in the domain's
		// active-keys index (on the processor's retry, as its commits).
		Active: tablestore.NewLedgers(c.tables.NewClient(cfg.LedgersTable)).Keys(d.Rules.Noun()),
	})
	keys := c.operatorStore(d.Table)
	open := c.deadLetters(d.Queue)
	rep := operator.QueueReplayer{Domain: d.Rules, Open: open, Options: replay.Options{MaxScan: cfg.ReplayScanLimit, Orders: keys}}
	ar, share := cfg.AutoReplay, len(cfg.Domains)
	ledgers := c.operatorLedgers(cfg.LedgersTable, d.Rules)
	healer := heal.New(keys, keys, keys, open, heal.Options{Domain: d.Rules, Disabled: !ar.Enabled, BackoffBase: ar.BackoffBase, BackoffMax: ar.BackoffMax, BreakerBase: ar.BreakerBase,
		MaxOrders: split(ar.MaxOrders, share), MaxScan: split(cfg.ReplayScanLimit, share),
		PeekTimeout: handler.DeadLetterPeekDeadline, PassTimeout: handler.AutoReplayPassDeadline,
		Active: ledgers, LagWindow: cfg.LagWindow, LagPerRun: split(cfg.LagPerRun, share), BlockedPerRun: split(ar.BlockedPerRun, share),
		Resume: processor.Resume})
	return handler.Domain{Rules: d.Rules, Processor: processor, Keys: keys, Blocked: keys, Replay: rep, Heal: healer,
		Allocations: ledgers, Queue: d.Queue}
}

// split is one domain's share of a run's budget n: at least 1.
func split(n, domains int) int { return max(1, (n+domains-1)/domains) }
