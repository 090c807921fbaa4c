package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/metrics"
)

// Healer is automatic replay and the orders' health (heal.Healer).
type Healer interface {
	Explain(ctx context.Context, orders []convoy.BlockedOrder) ([]heal.BlockedWithCause, error)
	Summarize(ctx context.Context) (heal.Summary, error)
	RunOnce(ctx context.Context) heal.Run
}

var _ Healer = (*heal.Healer)(nil)

// Log lines of AutoReplay, in the Logs of its (always successful)
// invocation: the host logs them under Function.AutoReplay.User at
// Information, which the shipped host.json keeps, and the alert rules of
// infra/modules/alerts.bicep match them (prefix and key=value fields).
const (
	LineMetrics  = "metrics"              // the figures of Summary, every run
	LineReplayed = "auto-replay replayed" // one order's dead letters re-sent
	LineFailed   = "auto-replay failed"   // one order's replay failed
	LinePaused   = "auto-replay paused"   // the run replayed nothing: storage or Service Bus failing, breaker open
	// LineUnrecorded: the run's figures could not be written into the
	// auto-replay record (the summary and the surveys stay where they were).
	LineUnrecorded = "auto-replay unrecorded"
)

// MetricsLine is the summary as one line of key=value fields, as AutoReplay
// writes it into its Logs.
func MetricsLine(s heal.Summary) string { return logLine(LineMetrics, metricsAttrs(s)...) }

// metricsAttrs are the fields of the metrics line, in their order.
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

// figures are the gauges' values in s, the figures of the metrics line.
func figures(s heal.Summary) metrics.Figures {
	f := metrics.Figures{BlockedOrders: int64(s.BlockedOrders), ParkedMessages: s.ParkedMessages}
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
// replay, then the figures as a metrics line. It always succeeds (a failed
// call's Logs are lost, and a timer is not retried): what went wrong is in
// its lines.
func (s *server) autoReplay(ctx context.Context, c *call) (map[string]any, error) {
	var timer struct{ IsPastDue bool }
	if raw, ok := c.req.Data["timer"]; ok {
		_ = json.Unmarshal(raw, &timer) // informational only
	}
	if s.Heal == nil {
		return nil, fault.Errorf(fault.Internal, "automatic replay is not configured")
	}
	r := s.Heal.RunOnce(ctx)
	for _, x := range r.Replayed {
		c.outcome(slog.LevelInfo, LineReplayed, "orderId", x.OrderID, "seqs", strings.Trim(fmt.Sprint(x.Seqs), "[]"),
			"attempt", x.Attempt, "left", x.Left, "nextWait", x.NextWait)
	}
	for _, f := range r.Failed {
		c.outcome(slog.LevelWarn, LineFailed, "orderId", f.OrderID, "error", f.Error)
	}
	if r.FailedMore > 0 { // a run lists at most AutoReplayMaxOrders: one line for the rest
		c.outcome(slog.LevelWarn, LineFailed, "more", r.FailedMore,
			"error", fmt.Sprintf("and %d more orders, not listed (a run lists at most AutoReplayMaxOrders)", r.FailedMore))
	}
	if r.Paused != "" {
		c.outcome(slog.LevelWarn, LinePaused, "reason", r.Paused)
	}
	if r.Unrecorded != "" {
		c.outcome(slog.LevelWarn, LineUnrecorded, "reason", r.Unrecorded)
	}
	if r.Summary != nil {
		c.outcome(slog.LevelInfo, LineMetrics, metricsAttrs(*r.Summary)...)
		s.Metrics.SetFigures(figures(*r.Summary))
	}
	s.Metrics.AutoReplayed(ctx, "replayed", len(r.Replayed))
	s.Metrics.AutoReplayed(ctx, "failed", len(r.Failed)+r.FailedMore)
	c.logAt(slog.LevelDebug, "auto-replay run", "waiting", r.Waiting, "elsewhere", r.Elsewhere, "deferred", r.Deferred, "pastDue", timer.IsPastDue)
	return nil, nil
}
