package handler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
)

// Deadlines of the functions called over HTTP or by the timer: every Table
// Storage and Service Bus call such a call makes ends by then, well inside
// the host's functionTimeout (host.json: 2 minutes, after which the host
// kills the handler and fails every call in flight). The queue-triggered
// functions (OrderProcessor, LedgerIngest) have none here: their Table and
// Service Bus calls retry within TransientRetrySeconds (fault.RetryPolicy).
const (
	// ReadDeadline: OrderStatus, BlockedOrders, HealthSummary (and so the
	// dashboard's data), reads of Table Storage and one peek of the
	// dead-letter queue.
	ReadDeadline = 20 * time.Second
	// DeadLetterPeekDeadline bounds the one read of the dead-letter queue
	// behind BlockedOrders, HealthSummary and each AutoReplay run
	// (heal.Options.PeekTimeout): with Service Bus down or silent these
	// answer in about this long, each blocked order's missing message
	// "unknown", with why.
	DeadLetterPeekDeadline = 3 * time.Second
	// SkipDeadline: SkipGap, one processor commit retried within
	// TransientRetrySeconds (20 s by default).
	SkipDeadline = 30 * time.Second
	// ReplayDeadline: ReplayOrder and ReplayDeadLetters (a few seconds per
	// hundred dead letters re-sent, plus a 5 s wait for the last receive).
	ReplayDeadline = 60 * time.Second
	// AutoReplayDeadline: one AutoReplay run; it starts no order's replay
	// with less than AutoReplayOrderDeadline left, the rest wait for the
	// next run.
	AutoReplayDeadline = 60 * time.Second
	// AutoReplayOrderDeadline bounds one order's replay in a run
	// (heal.Options.OrderTimeout).
	AutoReplayOrderDeadline = 20 * time.Second
	// UploadDeadline: LedgerUpload. The longest, as a ledger of many
	// thousands of orders takes tens of seconds; one cut short answers 503
	// and resumes from its checkpoint when sent again.
	UploadDeadline = 90 * time.Second
)

// deadlines are the functions' deadlines by name.
var deadlines = map[string]time.Duration{
	FnOrderStatus:   ReadDeadline,
	FnBlockedOrders: ReadDeadline,
	FnSummary:       ReadDeadline,
	FnDashboard:     ReadDeadline, // the page only: its data are HealthSummary and BlockedOrders
	FnSkipGap:       SkipDeadline,
	FnReplayOrder:   ReplayDeadline,
	FnReplayAll:     ReplayDeadline,
	FnAutoReplay:    AutoReplayDeadline,
	FnLedgerUpload:  UploadDeadline,
}

// withDeadline bounds ctx by the deadline of function name, if it has one.
func (s *server) withDeadline(ctx context.Context, name string) (context.Context, context.CancelFunc) {
	if d, ok := s.Deadlines[name]; ok {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}

// pastDeadline classifies an error that only says the function's deadline
// passed (a call that did not classify it) as Unavailable, naming the
// deadline: a 503, not a 500.
func (s *server) pastDeadline(ctx context.Context, name string, err error) error {
	if err == nil || fault.CodeOf(err) != fault.Internal || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() == nil {
		return err
	}
	return fault.Wrap(fault.Unavailable, err, fmt.Sprintf("%s did not finish within its deadline of %s: storage or Service Bus is slow or unavailable", name, s.Deadlines[name]))
}
