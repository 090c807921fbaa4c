package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/metrics"
)

// Healer is automatic replay and the health of a domain's keys
// (heal.Healer).
type Healer interface {
	Explain(ctx context.Context, orders []convoy.BlockedOrder) ([]heal.BlockedWithCause, error)
	Summarize(ctx context.Context) (heal.Summary, error)
	RunOnce(ctx context.Context) heal.Run
}

var _ Healer = (*heal.Healer)(nil)

// Log lines of AutoReplay, in the Logs of its (always successful)
// invocation: the host logs them under Function.AutoReplay.User at
// Information, which the shipped host.json keeps, and the alert rules of
// infra/modules/alerts.bicep match them (prefix and key=value fields). Each
// line is of one domain's run: its first field is domain=<Name>, and a
// key's id is <noun>Id (orderId, accountId).
const (
	LineMetrics  = "metrics"              // the figures of Summary, every run
	LineReplayed = "auto-replay replayed" // one key's dead letters re-sent
	LineFailed   = "auto-replay failed"   // one key's replay failed
	LinePaused   = "auto-replay paused"   // the run replayed nothing: storage or Service Bus failing, breaker open
	// LineUnrecorded: the run's figures could not be written into the
	// auto-replay record (the summary and the surveys stay where they were).
	LineUnrecorded = "auto-replay unrecorded"
)

// MetricsLine is the summary of domain (its Name) as one line of key=value
// fields, as AutoReplay writes it into its Logs.
func MetricsLine(domain string, s heal.Summary) string {
	return logLine(LineMetrics, append([]any{"domain", domain}, metricsAttrs(s)...)...)
}

// metricsAttrs are the fields of the metrics line after its domain, in
// their order.
func metricsAttrs(s heal.Summary) []any {
	dl := s.DeadLetters
	if dl == nil {
		dl = &heal.DeadLetters{}
	}
	lag := s.Lag
	if lag == nil {
		lag = &heal.LagFigures{}
	}
	var oldest, oldestSurvey int64
	if len(lag.OldestHeads) > 0 {
		oldest = int64(lag.OldestHeads[0].HeadAgeSeconds)
	}
	if !lag.OldestSurveyAt.IsZero() {
		oldestSurvey = int64(lag.At.Sub(lag.OldestSurveyAt) / time.Second)
	}
	attrs := []any{
		"blockedOrders", s.BlockedOrders,
		"oldestBlockedSeconds", s.OldestBlockedSeconds,
		"parkedMessages", s.ParkedMessages,
		"deadLetters", dl.Total,
		"deadLettersTransient", dl.Transient,
		"deadLettersPermanent", dl.Permanent,
		"autoReplayPending", s.AutoReplay.Pending,
		"autoReplayRetrying", s.AutoReplay.Retrying,
		"autoReplayed", s.AutoReplay.Replayed,
		"autoReplayEnabled", s.AutoReplay.Enabled,
		"breakerOpen", s.AutoReplay.BreakerOpen,
		"lagOrders", lag.Orders,
		"lagOk", lag.ByStatus[convoy.LagOK],
		"lagCatchingUp", lag.ByStatus[convoy.LagCatchingUp],
		"lagStalled", lag.ByStatus[convoy.LagStalled],
		"lagBlocked", lag.ByStatus[convoy.LagBlocked],
		"lagStalledTwoWindows", lag.StalledTwoWindows,
		"oldestHeadSeconds", oldest,
	}
	// Critical times only over something applied: 0 would read as instant.
	if crit := lag.CriticalTime; crit != nil {
		attrs = append(attrs, "criticalTimeP50Ms", crit.P50Ms, "criticalTimeP99Ms", crit.P99Ms, "criticalTimeMaxMs", crit.MaxMs)
	}
	// The survey's coverage (issue 37): orders surveyed this period, how
	// long ago the oldest survey counted was, how long a pass took.
	return append(attrs,
		"lagSurveyedThisPeriod", lag.SurveyedThisPeriod,
		"lagOldestSurveySeconds", oldestSurvey,
		"lagPeriodSeconds", lag.PeriodSeconds)
}

// figures are the gauges' values of domain in s, the figures of its
// metrics line.
func figures(domain string, s heal.Summary) metrics.Figures {
	f := metrics.Figures{Domain: domain, BlockedOrders: int64(s.BlockedOrders), ParkedMessages: s.ParkedMessages}
	if dl := s.DeadLetters; dl != nil {
		f.DeadLettersRead, f.DeadLettersTransient, f.DeadLettersPermanent = true, int64(dl.Transient), int64(dl.Permanent)
	}
	if lag := s.Lag; lag != nil {
		for _, st := range []convoy.LagStatus{convoy.LagOK, convoy.LagCatchingUp, convoy.LagStalled, convoy.LagBlocked} {
			f.Lag = append(f.Lag, metrics.LagCount{Status: string(st), Orders: int64(lag.ByStatus[st])})
		}
	}
	return f
}

// autoReplay is AutoReplay, the timer function: one run of automatic
// replay of every domain, at once, then each domain's lines and figures as
// a metrics line, in their registered order. It always succeeds (a failed call's Logs are lost, and a timer is
// not retried): what went wrong is in its lines.
func (s *server) autoReplay(ctx context.Context, c *call) (map[string]any, error) {
	var timer struct{ IsPastDue bool }
	if raw, ok := c.req.Data["timer"]; ok {
		_ = json.Unmarshal(raw, &timer) // informational only
	}
	var healed []*served
	for _, d := range s.domains {
		if d.Heal != nil {
			healed = append(healed, d)
		}
	}
	if len(healed) == 0 {
		return nil, fault.Errorf(fault.Internal, "automatic replay is not configured")
	}
	// The domains' runs go at once, each until the invocation's deadline:
	// one domain's backlog or outage (a hung table, an unreachable queue)
	// neither delays another's run nor takes its time. Their requests are
	// bounded by the budgets each healer was given (serve splits them).
	runs := make([]heal.Run, len(healed))
	var wg sync.WaitGroup
	for i, d := range healed {
		wg.Go(func() { runs[i] = d.Heal.RunOnce(ctx) })
	}
	wg.Wait()
	for i, d := range healed {
		s.autoReplayLines(ctx, c, d, runs[i], timer.IsPastDue)
	}
	return nil, nil
}

// autoReplayLines are the lines of d's run r, each with domain=<Name>
// first, and its metrics.
func (s *server) autoReplayLines(ctx context.Context, c *call, d *served, r heal.Run, pastDue bool) {
	domain, idName := d.fns.Name, d.fns.IDName
	line := func(level slog.Level, msg string, attrs ...any) {
		c.outcome(level, msg, append([]any{"domain", domain}, attrs...)...)
	}
	for _, x := range r.Replayed {
		line(slog.LevelInfo, LineReplayed, idName, x.OrderID, "seqs", strings.Trim(fmt.Sprint(x.Seqs), "[]"),
			"attempt", x.Attempt, "left", x.Left, "nextWait", x.NextWait)
	}
	for _, f := range r.Failed {
		line(slog.LevelWarn, LineFailed, idName, f.OrderID, "error", f.Error)
	}
	if r.FailedMore > 0 { // a run lists at most AutoReplayMaxOrders: one line for the rest
		line(slog.LevelWarn, LineFailed, "more", r.FailedMore,
			"error", fmt.Sprintf("and %d more %s, not listed (a run lists at most AutoReplayMaxOrders)", r.FailedMore, domain))
	}
	if r.Paused != "" {
		line(slog.LevelWarn, LinePaused, "reason", r.Paused)
	}
	if r.Unrecorded != "" {
		line(slog.LevelWarn, LineUnrecorded, "reason", r.Unrecorded)
	}
	if r.Summary != nil {
		line(slog.LevelInfo, LineMetrics, metricsAttrs(*r.Summary)...)
		s.Metrics.SetFigures(figures(domain, *r.Summary))
	}
	s.Metrics.AutoReplayed(ctx, domain, "replayed", len(r.Replayed))
	s.Metrics.AutoReplayed(ctx, domain, "failed", len(r.Failed)+r.FailedMore)
	c.logAt(slog.LevelDebug, "auto-replay run", "domain", domain, "waiting", r.Waiting, "elsewhere", r.Elsewhere, "deferred", r.Deferred, "pastDue", pastDue)
}
