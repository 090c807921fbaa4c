package handler

import (
	"context"
	"net/http"
	"strconv"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Replayer replays an order's dead-lettered messages (replay.Order with this
// process's dead-letter source and sender).
type Replayer interface {
	Replay(ctx context.Context, orderID string) (replay.Report, error)
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
	return http.StatusOK, page, nil
}

// replayOrder is ReplayOrder: POST /api/orders/{orderId}/replay.
func (s *server) replayOrder(ctx context.Context, r httpRequest) (int, any, error) {
	id := r.Params["orderId"]
	if why := convoy.CheckID(id); why != "" {
		return 0, nil, fault.Errorf(fault.Invalid, "orderId %s", why)
	}
	rep, err := s.Replay.Replay(ctx, id)
	s.Logger.Info("dead letters replayed by operator", "orderId", id, "replayed", len(rep.Replayed),
		"unplaceable", len(rep.Unplaceable), "scanned", rep.Scanned, "error", err)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rep, nil
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
	res, err := s.Processor.Skip(ctx, id, seq)
	if err != nil {
		return 0, nil, err
	}
	o, err := s.Orders.Load(ctx, id)
	if err != nil {
		return 0, nil, fault.Wrap(fault.Unavailable, err, "the gap was skipped; reading the order back failed")
	}
	out := SkipResult{OrderID: id, Skipped: seq, Drained: []int64{}, Order: o.View()}
	for _, o := range res.Outcomes {
		if o.Drained {
			out.Drained = append(out.Drained, o.Seq)
		}
	}
	s.Logger.Warn("gap skipped by operator", "orderId", id, "seq", seq, "drained", len(out.Drained), "appliedSeq", out.Order.AppliedSeq)
	return http.StatusOK, out, nil
}
