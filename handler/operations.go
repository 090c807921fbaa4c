package handler

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Replayer replays dead-lettered order messages (replay.Order and
// replay.All with this process's dead-letter source, sender and order store).
type Replayer interface {
	Replay(ctx context.Context, orderID string) (replay.Report, error)
	// ReplayAll is one call of replay.All: max 0 is the default.
	ReplayAll(ctx context.Context, max int, continuation string) (replay.Progress, error)
}

// retryAfterSeconds is the Retry-After of a replay that found dead letters
// locked by another reader: about the orders queue's lock duration (1 minute
// as deployed), after which locks that were not released expire.
const retryAfterSeconds = 60

// incompleteAnswer is the answer of a replay that could not see every dead
// letter: the JSON error shape of docs/contract.md ("error") with the report's
// fields beside it. Locked by another reader: 503 with Retry-After (running
// again later finishes the job); the scan limit reached: 409 (running again
// the same way cannot: replay every dead letter, or raise ReplayScanLimit).
func incompleteAnswer(inc *replay.Incomplete, report any) (int, any) {
	body := withError(report, inc.Reason)
	if inc.LockedElsewhere() {
		return http.StatusServiceUnavailable, withHeaders{Body: body, Headers: map[string]string{"Retry-After": strconv.Itoa(retryAfterSeconds)}}
	}
	return http.StatusConflict, body
}

// failedAnswer is the answer of a replay that failed part-way (Service Bus or
// storage unavailable, its deadline reached): the error's status and JSON
// error shape, with the report of what was done before it beside it. What
// was replayed stays replayed; the rest stays dead-lettered.
func failedAnswer(err error, report any) (int, any) {
	status, e := errorResponse(err)
	body := withError(report, e.Error)
	if status == http.StatusServiceUnavailable {
		return status, withHeaders{Body: body, Headers: map[string]string{"Retry-After": strconv.Itoa(retryAfterSeconds)}}
	}
	return status, body
}

// withError is report's JSON object with "error" beside its fields.
func withError(report any, msg string) map[string]any {
	body := map[string]any{}
	raw, _ := json.Marshal(report)
	_ = json.Unmarshal(raw, &body)
	body["error"] = msg
	return body
}

// blockedOrders is BlockedOrders: GET /api/orders?blocked=true.
func (s *server) blockedOrders(ctx context.Context, r httpRequest) (int, any, error) {
	if r.Query.Get("blocked") != "true" {
		return 0, nil, fault.Errorf(fault.Invalid, "only blocked orders can be listed: add ?blocked=true")
	}
	size := 100
	if v := r.Query.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, nil, fault.Errorf(fault.Invalid, "pageSize %q is not an integer", v)
		}
		size = n
	}
	page, err := convoy.ListBlocked(ctx, s.Blocked, r.Query.Get("continuation"), size)
	if err != nil {
		return 0, nil, err
	}
	if s.Heal == nil {
		return http.StatusOK, page, nil
	}
	// Each order with where its missing message is, and why (one peek of
	// the dead-letter queue per page).
	out := map[string]any{"orders": s.Heal.Explain(ctx, page.Orders)}
	if page.Continuation != "" {
		out["continuation"] = page.Continuation
	}
	return http.StatusOK, out, nil
}

// replayOrder is ReplayOrder: POST /api/orders/{orderId}/replay.
func (s *server) replayOrder(ctx context.Context, r httpRequest) (int, any, error) {
	id := r.Params["orderId"]
	if why := convoy.CheckID(id); why != "" {
		return 0, nil, fault.Errorf(fault.Invalid, "orderId %s", why)
	}
	rep, err := s.Replay.Replay(ctx, id)
	s.Logger.Log(context.Background(), levelOf(err), "dead letters replayed by operator", "orderId", id, "replayed", len(rep.Replayed),
		"duplicates", len(rep.Duplicates), "unplaceable", len(rep.Unplaceable), "scanned", rep.Scanned,
		"incomplete", rep.Incomplete != nil, "error", err)
	if err != nil {
		status, body := failedAnswer(s.pastDeadline(ctx, FnReplayOrder, err), rep)
		return status, body, nil
	}
	if rep.Incomplete != nil {
		status, body := incompleteAnswer(rep.Incomplete, rep)
		return status, body, nil
	}
	return http.StatusOK, rep, nil
}

// levelOf is the level of a replay's log line: an error when it failed with
// a 5xx (its answer carries the report, so handleError does not log it).
func levelOf(err error) slog.Level {
	if err == nil {
		return slog.LevelInfo
	}
	if status, _ := errorResponse(err); status >= 500 {
		return slog.LevelError
	}
	return slog.LevelInfo
}

// maxReplayAllParam bounds ReplayDeadLetters' max query parameter (the
// replayer's scan limit may be lower).
const maxReplayAllParam = 1_000_000

// replayDeadLetters is ReplayDeadLetters: POST
// /api/deadletters/replay[?max=N&continuation=T], one bounded call of
// replay.All. 200 with "done": true when nothing placeable is left, 200 with
// a continuation when more follows; 503 (Retry-After) or 409 when it could
// not see everything (incompleteAnswer).
func (s *server) replayDeadLetters(ctx context.Context, r httpRequest) (int, any, error) {
	max, token, err := replayAllParams(r.Query)
	if err != nil {
		return 0, nil, err
	}
	p, err := s.Replay.ReplayAll(ctx, max, token)
	s.Logger.Log(context.Background(), levelOf(err), "dead letters replayed by operator (all orders)", "scanned", p.Scanned, "replayed", p.Replayed,
		"orders", p.Orders, "duplicates", p.Duplicates, "unplaceable", p.Unplaceable, "done", p.Done,
		"totalReplayed", p.Totals.Replayed, "incomplete", p.Incomplete != nil, "error", err)
	if err != nil {
		status, body := failedAnswer(s.pastDeadline(ctx, FnReplayAll, err), p)
		return status, body, nil
	}
	if p.Incomplete != nil {
		status, body := incompleteAnswer(p.Incomplete, p)
		return status, body, nil
	}
	return http.StatusOK, p, nil
}

// replayAllParams validates ReplayDeadLetters' query: max, an integer from 1
// to maxReplayAllParam (default: the replayer's), and continuation, a token
// of replay.All.
func replayAllParams(q url.Values) (int, string, error) {
	max := 0
	if v := q.Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxReplayAllParam {
			return 0, "", fault.Errorf(fault.Invalid, "max %q is not an integer from 1 to %d", cut(v), maxReplayAllParam)
		}
		max = n
	}
	token := q.Get("continuation")
	if _, err := replay.ParseContinuation(token); err != nil {
		return 0, "", err
	}
	return max, token, nil
}

// cut shortens quoted outside input in error messages.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// SkipResult is SkipGap's answer.
type SkipResult struct {
	OrderID string      `json:"orderId"`
	Skipped int64       `json:"skipped"`
	Drained []int64     `json:"drained"`
	Order   convoy.View `json:"order"`
}

// skipGap is SkipGap: POST /api/orders/{orderId}/skip?seq=N. N must be the
// order's missing seq; anything else changes nothing.
func (s *server) skipGap(ctx context.Context, r httpRequest) (int, any, error) {
	id := r.Params["orderId"]
	if why := convoy.CheckID(id); why != "" {
		return 0, nil, fault.Errorf(fault.Invalid, "orderId %s", why)
	}
	seq, err := strconv.ParseInt(r.Query.Get("seq"), 10, 64)
	if err != nil || seq < 1 {
		return 0, nil, fault.Errorf(fault.Invalid, "seq must be the order's missing seq, an integer ≥ 1")
	}
	res, view, err := s.Processor.Skip(ctx, id, seq)
	if err != nil {
		return 0, nil, err
	}
	out := SkipResult{OrderID: id, Skipped: seq, Drained: []int64{}, Order: view}
	for _, o := range res.Outcomes {
		if o.Drained {
			out.Drained = append(out.Drained, o.Seq)
		}
	}
	s.Logger.Warn("gap skipped by operator", "orderId", id, "seq", seq, "drained", len(out.Drained), "appliedSeq", out.Order.AppliedSeq)
	return http.StatusOK, out, nil
}
