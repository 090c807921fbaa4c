package handler

import (
	"context"
	"encoding/json"
	"fmt"
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
	// Each order with where its missing message is, and why, as AutoReplay
	// last learnt it (nothing of Service Bus is read per page).
	explained, err := s.Heal.Explain(ctx, page.Orders)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{"orders": explained}
	if page.Continuation != "" {
		out["continuation"] = page.Continuation
	}
	return http.StatusOK, out, nil
}

// replayOrder is ReplayOrder: POST /api/orders/{orderId}/replay.
func (s *server) replayOrder(ctx context.Context, r httpRequest) (int, any, error) {
	id := r.Params["orderId"]
	if err := CheckOrderID(id); err != nil {
		return 0, nil, err
	}
	rep, err := ReplayOrder(ctx, s.Replay, id)
	s.Logger.Log(context.Background(), levelOf(err), "dead letters replayed by operator", "orderId", id, "replayed", len(rep.Replayed),
		"duplicates", len(rep.Duplicates), "unplaceable", len(rep.Unplaceable), "left", len(rep.Left), "scanned", rep.Scanned,
		"incomplete", rep.Incomplete != nil, "error", err)
	status, body := ReplayAnswer(rep, s.pastDeadline(ctx, FnReplayOrder, err))
	return status, body, nil
}

// CheckOrderID refuses an order id that no order can have (an Invalid fault).
func CheckOrderID(id string) error {
	if why := convoy.CheckID(id); why != "" {
		return fault.Errorf(fault.Invalid, "orderId %s", why)
	}
	return nil
}

// OrderReplay is ReplayOrder's report: replay.Report, with each dead letter
// the replay left dead-lettered and why (its "left" replaces the report's).
type OrderReplay struct {
	replay.Report
	Left []LeftDeadLetter `json:"left,omitempty"`
}

// LeftDeadLetter is a dead letter an operator's replay did not re-send: one
// of a permanent cause (heal.Classify), which would only be dead-lettered
// again. Its gap is for SkipGap.
type LeftDeadLetter struct {
	MessageID string `json:"messageId"`
	Seq       int64  `json:"seq,omitempty"` // 0 when it has no readable seq
	Cause     string `json:"cause,omitempty"`
	Why       string `json:"why,omitempty"`
}

// ExplainingReplayer is a Replayer that says why it left each dead letter
// it did not re-send (the program's: clients.go); a Replayer without it is
// reported with the ids of Report.Left only.
type ExplainingReplayer interface {
	ReplayOrder(ctx context.Context, orderID string) (OrderReplay, error)
}

// ReplayOrder replays orderID's dead letters with r: the one code path of
// ReplayOrder (POST /api/orders/{orderId}/replay) and `convoy replay`. Its
// answer is ReplayAnswer's.
func ReplayOrder(ctx context.Context, r Replayer, orderID string) (OrderReplay, error) {
	if err := CheckOrderID(orderID); err != nil {
		return OrderReplay{Report: replay.Report{OrderID: orderID, Replayed: []replay.Replayed{}}}, err
	}
	if x, ok := r.(ExplainingReplayer); ok {
		return x.ReplayOrder(ctx, orderID)
	}
	rep, err := r.Replay(ctx, orderID)
	out := OrderReplay{Report: rep}
	for _, id := range rep.Left {
		out.Left = append(out.Left, LeftDeadLetter{MessageID: id})
	}
	return out, err
}

// ReplayAnswer is the status and JSON body of a replay's report and error:
// 200 with the report; a failure's status (errorResponse) or, when the
// replay could not see every dead letter, 503 with Retry-After or 409
// (incompleteAnswer), with "error" beside the report.
func ReplayAnswer(rep OrderReplay, err error) (int, any) {
	if err != nil {
		return failedAnswer(err, rep)
	}
	if rep.Incomplete != nil {
		return incompleteAnswer(rep.Incomplete, rep)
	}
	return http.StatusOK, rep
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
	// SkippedEarlier: the seq was skipped already, by an earlier skip whose
	// answer was lost; this one skipped nothing and settles its dead letter.
	SkippedEarlier bool `json:"skippedEarlier,omitempty"`
	// Draining says, when the drain behind the skip stopped short of the
	// parked tail (the answer's deadline, storage failing), how it goes on.
	Draining string `json:"draining,omitempty"`
	// DeadLetter says what became of the skipped seq's dead letter (absent
	// when the skip had no Service Bus to look with).
	DeadLetter *SkippedDeadLetter `json:"deadLetter,omitempty"`
}

// SkippedDeadLetter is what a skip did with the dead letter of its seq: once
// the seq is skipped it is a duplicate, completed so that it no longer
// counts (and alerts) as a dead letter of a permanent cause.
type SkippedDeadLetter struct {
	Completed []string `json:"completed"` // message ids completed
	Note      string   `json:"note,omitempty"`
}

// SkipSettler completes the dead letters of a seq an operator skipped (the
// program's replayer: replay.Order choosing that seq, which the order now
// counts as applied, so it is completed as a duplicate, never re-sent).
type SkipSettler interface {
	SettleSkipped(ctx context.Context, orderID string, seq int64) (replay.Report, error)
}

// SettleSkipped completes the dead letter of the seq res skipped, if any,
// and says so in res; a skip stands whatever this finds (its dead letter is
// then left for a replay of every dead letter, which completes it as a
// duplicate).
func SettleSkipped(ctx context.Context, s SkipSettler, res *SkipResult) {
	rep, err := s.SettleSkipped(ctx, res.OrderID, res.Skipped)
	d := &SkippedDeadLetter{Completed: []string{}}
	for _, x := range rep.Duplicates {
		d.Completed = append(d.Completed, x.MessageID)
	}
	switch {
	case err != nil:
		d.Note = "the dead-letter queue could not be read: " + cut(fault.MessageOf(err)) + "; a replay of every dead letter (POST /api/deadletters/replay) completes it later"
	case rep.Incomplete != nil:
		d.Note = rep.Incomplete.Reason
	case len(d.Completed) == 0:
		d.Note = fmt.Sprintf("no dead letter of seq %d: it was never dead-lettered (or already removed)", res.Skipped)
	}
	res.DeadLetter = d
}

// skipGap is SkipGap: POST /api/orders/{orderId}/skip?seq=N. N must be the
// order's missing seq; anything else changes nothing.
func (s *server) skipGap(ctx context.Context, r httpRequest) (int, any, error) {
	out, err := SkipGap(ctx, s.Processor, r.Params["orderId"], r.Query.Get("seq"))
	if err != nil {
		return 0, nil, err
	}
	if settler, ok := s.Replay.(SkipSettler); ok {
		// The skip stands; looking for its dead letter has a deadline of
		// its own (a scan ends with a receive that waits).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), SkipSettleDeadline)
		SettleSkipped(sctx, settler, &out)
		cancel()
	}
	s.Logger.Warn("gap skipped by operator", "orderId", out.OrderID, "seq", out.Skipped, "drained", len(out.Drained), "appliedSeq", out.Order.AppliedSeq)
	return http.StatusOK, out, nil
}

// SkipGap records seq (as text, from the outside) of orderID as skipped with
// p: the one code path of SkipGap (POST /api/orders/{orderId}/skip?seq=N)
// and `convoy skip`. seq must be the order's missing seq; anything else is a
// fault (Invalid, NotFound or Conflict) that changes nothing.
func SkipGap(ctx context.Context, p OrderProcessor, orderID, seq string) (SkipResult, error) {
	if err := CheckOrderID(orderID); err != nil {
		return SkipResult{}, err
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n < 1 {
		return SkipResult{}, fault.Errorf(fault.Invalid, "seq must be the order's missing seq, an integer ≥ 1 (got %q)", cut(seq))
	}
	res, view, err := p.Skip(ctx, orderID, n)
	if err != nil {
		return SkipResult{}, err
	}
	out := SkipResult{OrderID: orderID, Skipped: n, Drained: []int64{}, Order: view, SkippedEarlier: res.SkippedEarlier}
	for _, o := range res.Outcomes {
		if o.Drained {
			out.Drained = append(out.Drained, o.Seq)
		}
	}
	if res.Draining {
		out.Draining = fmt.Sprintf("the skip stands; %d parked message(s) behind it are still to drain: "+
			"each read of the order (GET /api/orders/%s) and each AutoReplay run resumes the drain, as does the order's next message", view.Parked, orderID)
	}
	return out, nil
}
