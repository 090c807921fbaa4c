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
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
)

// The operator's functions are HTTP clients of package operator, which
// decides what a replay or a skip does and answers; here its outcome
// becomes a status (replayAnswer).

// defaultBlockedPageSize is a blocked list's page (BlockedOrders) when
// pageSize is not given: a screenful for an operator, and two Table round
// trips with the keys' causes (docs/performance.md, blocked_page_trips:
// about 14 ms on Azurite), far inside ReadDeadline. pageSize asks for up to
// convoy.MaxBlockedPageSize.
const defaultBlockedPageSize = 100

// blockedKeys is d's blocked list (BlockedOrders): GET
// /api/<Name>?blocked=true, {"<Name>": [the blocked keys], "continuation": …}.
func (s *server) blockedKeys(d *served) httpFunc {
	return func(ctx context.Context, r httpRequest) (int, any, error) {
		if r.Query.Get("blocked") != "true" {
			return 0, nil, fault.Errorf(fault.Invalid, "only blocked %s can be listed: add ?blocked=true", d.fns.Name)
		}
		size := defaultBlockedPageSize
		if v := r.Query.Get("pageSize"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, nil, fault.Errorf(fault.Invalid, "pageSize %q is not an integer", v)
			}
			size = n
		}
		page, err := convoy.ListBlocked(ctx, d.Blocked, r.Query.Get("continuation"), size)
		if err != nil {
			return 0, nil, err
		}
		out := blockedAnswer{fns: d.fns, Continuation: page.Continuation}
		if d.Heal == nil {
			out.Keys = page.Orders
			return http.StatusOK, out, nil
		}
		// Each key with where its missing message is, and why, as AutoReplay
		// last learnt it (nothing of Service Bus is read per page).
		if out.Keys, err = d.Heal.Explain(ctx, page.Orders); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, out, nil
	}
}

// blockedAnswer is a page of a blocked list: the keys under the domain's
// Name, each with its id under the domain's IDName, then the continuation
// when more follow (for orders, the answer BlockedOrders always gave).
type blockedAnswer struct {
	fns          Functions
	Keys         any // []convoy.BlockedOrder, or []heal.BlockedWithCause
	Continuation string
}

func (a blockedAnswer) MarshalJSON() ([]byte, error) {
	keys, err := operator.WithIDName(a.Keys, a.fns.IDName)
	if err != nil {
		return nil, err
	}
	name, _ := json.Marshal(a.fns.Name)
	out := append(append(append([]byte{'{'}, name...), ':'), keys...)
	if a.Continuation != "" {
		token, _ := json.Marshal(a.Continuation)
		out = append(append(out, `,"continuation":`...), token...)
	}
	return append(out, '}'), nil
}

// replayKey is d's replay function (ReplayOrder): POST
// /api/<Name>/{<noun>Id}/replay.
func (s *server) replayKey(d *served) httpFunc {
	return func(ctx context.Context, r httpRequest) (int, any, error) {
		id := r.Params[d.fns.IDName]
		if err := operator.CheckID(d.Rules, id); err != nil {
			return 0, nil, err
		}
		rep, err := operator.ReplayOrder(ctx, d.Rules, d.Replay, id)
		s.Logger.Log(context.Background(), levelOf(err), "dead letters replayed by operator", d.fns.IDName, id, "replayed", len(rep.Replayed),
			"duplicates", len(rep.Duplicates), "unplaceable", len(rep.Unplaceable), "left", len(rep.Left), "scanned", rep.Scanned,
			"incomplete", rep.Incomplete != nil, "error", err)
		status, body := replayAnswer(operator.AnswerOf(rep, rep.Incomplete, s.pastDeadline(ctx, d.fns.Replay, err)))
		return status, body, nil
	}
}

// retryAfterSeconds is the Retry-After of a replay that found dead letters
// locked by another reader: about the orders queue's lock duration (1 minute
// as deployed), after which locks that were not released expire.
const retryAfterSeconds = 60

// replayAnswer is the status of an operator's replay, with its body
// (operator.Answer.Body): 200 when complete; 503 with Retry-After when
// another reader held dead letters (running again later finishes the job);
// 409 when the scan limit was reached (running again the same way cannot);
// a failure's status (errorResponse), with Retry-After when 503.
func replayAnswer(a operator.Answer) (int, any) {
	status := http.StatusOK
	switch a.Outcome {
	case operator.LockedElsewhere:
		status = http.StatusServiceUnavailable
	case operator.ScanLimitReached:
		status = http.StatusConflict
	case operator.Failed:
		status, _ = errorResponse(a.Err)
	}
	body := a.Body(func(err error) string { _, e := errorResponse(err); return e.Error })
	if status == http.StatusServiceUnavailable {
		return status, withHeaders{Body: body, Headers: map[string]string{"Retry-After": strconv.Itoa(retryAfterSeconds)}}
	}
	return status, body
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
// /api/deadletters/replay[?domain=D&max=N&continuation=T], one bounded call
// of replay.All on the queue of domain D (default: the first). 200 with
// "done": true when nothing placeable is left, 200 with a continuation when
// more follows; 503 (Retry-After) or 409 when it could not see everything
// (replayAnswer).
func (s *server) replayDeadLetters(ctx context.Context, r httpRequest) (int, any, error) {
	d, err := s.selected(r.Query)
	if err != nil {
		return 0, nil, err
	}
	max, token, err := replayAllParams(r.Query)
	if err != nil {
		return 0, nil, err
	}
	p, err := d.Replay.ReplayAll(ctx, max, token)
	s.Logger.Log(context.Background(), levelOf(err), "dead letters replayed by operator (all "+d.fns.Name+")", "scanned", p.Scanned, "replayed", p.Replayed,
		"orders", p.Orders, "duplicates", p.Duplicates, "unplaceable", p.Unplaceable, "done", p.Done,
		"totalReplayed", p.Totals.Replayed, "incomplete", p.Incomplete != nil, "error", err)
	status, body := replayAnswer(operator.AnswerOf(p, p.Incomplete, s.pastDeadline(ctx, FnReplayAll, err)))
	return status, body, nil
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

// skipGap is d's skip function (SkipGap): POST
// /api/<Name>/{<noun>Id}/skip?seq=N. N must be the key's missing seq;
// anything else changes nothing.
func (s *server) skipGap(d *served) httpFunc {
	return func(ctx context.Context, r httpRequest) (int, any, error) {
		out, err := operator.SkipGap(ctx, d.Rules, d.Processor, r.Params[d.fns.IDName], r.Query.Get("seq"))
		if err != nil {
			return 0, nil, err
		}
		if settler, ok := d.Replay.(operator.SkipSettler); ok {
			// The skip stands, whatever the function's deadline: settling its
			// dead letter has a deadline of its own (operator.SkipSettleDeadline).
			operator.SettleSkipped(context.WithoutCancel(ctx), settler, &out)
		}
		s.Logger.Warn("gap skipped by operator", d.fns.IDName, out.ID, "seq", out.Skipped, "drained", len(out.Drained), "appliedSeq", out.AppliedSeq)
		return http.StatusOK, out, nil
	}
}
