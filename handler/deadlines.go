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
// functions (<Noun>Processor, LedgerIngest) have none here: their Table and
// Service Bus calls retry within TransientRetrySeconds (fault.RetryPolicy).
const (
	// ReadDeadline: <Noun>Status, Blocked<Name>, HealthSummary (and so the
	// dashboard's data), reads of Table Storage only (what AutoReplay
	// learnt of the dead-letter queue is stored). Healthy, these answer in
	// well under a second; with storage accepting connections and never
	// answering they answer 503 in this long (their store's requests try
	// 3 s each, tablestore.OperatorRetry, so one stuck on a dead kept-alive
	// connection is tried again on a fresh one within this deadline).
	ReadDeadline = 5 * time.Second
	// DeadLetterPeekDeadline bounds the one read of the dead-letter queue of
	// each AutoReplay run (heal.Options.PeekTimeout): with Service Bus down
	// or silent, a run pauses in about this long and records why, which the
	// blocked list, the summary and the dashboard then say.
	DeadLetterPeekDeadline = 3 * time.Second
	// SkipDeadline: SkipGap (Skip<Noun>Gap), one read and one processor
	// commit (tens of milliseconds when healthy), retried within this
	// deadline rather than TransientRetrySeconds: an operator waits, and
	// calls again after a 503 (a skip already recorded is then refused,
	// changing nothing). The skip runs on the processor's store
	// (tablestore.ProcessorRetry, under the key's lock); this deadline alone
	// bounds it.
	SkipDeadline = 5 * time.Second
	// ReplayDeadline: ReplayOrder (Replay<Noun>) and ReplayDeadLetters (a
	// few seconds per hundred dead letters re-sent, plus a 5 s wait for the
	// last receive).
	ReplayDeadline = 60 * time.Second
	// AutoReplayDeadline: one AutoReplay invocation, which runs every
	// domain's automatic replay at once, each until this deadline. A run's
	// reads of the dead-letter queue, the index and the states end its
	// PassTimeout (AutoReplayPassDeadline) before the deadline, which its
	// one replay pass keeps; what it does not reach waits for the next run,
	// counted.
	// With storage hung, its first read fails within about 6 s
	// (tablestore.OperatorRetry) and the run pauses.
	AutoReplayDeadline = 60 * time.Second
	// AutoReplayPassDeadline is what a run keeps for its replay pass
	// (heal.Options.PassTimeout).
	AutoReplayPassDeadline = 20 * time.Second
	// UnavailableAnswer is how soon an operator's call that needs Service
	// Bus (ReplayOrder, ReplayDeadLetters, the settling after a SkipGap)
	// answers 503 when Service Bus refuses connections or never answers,
	// the same 5 s as ReadDeadline and SkipDeadline. Its first Service Bus
	// operation gives up after servicebus.OperationTimeout (3 s), which
	// leaves the rest of the call (reading the order before, closing the
	// receivers after, answering) room inside it; were the two equal, the
	// answer would always come just after it.
	UnavailableAnswer = 5 * time.Second
	// UploadDeadline: LedgerUpload. The longest, as a ledger of many
	// thousands of orders takes tens of seconds; one cut short answers 503
	// and resumes from its checkpoint when sent again.
	UploadDeadline = 90 * time.Second
)

// deadlines are the deadlines of the functions every domain shares, by name.
var deadlines = map[string]time.Duration{
	FnSummary:      ReadDeadline,
	FnDashboard:    ReadDeadline, // the page, and a key's parked window (one read); its other data are the summary, the blocked list and the status
	FnReplayAll:    ReplayDeadline,
	FnAutoReplay:   AutoReplayDeadline,
	FnLedgerUpload: UploadDeadline,
}

// domainDeadlines are the deadlines of a domain's functions, by name: each
// role's, whatever the domain (the order domain's OrderStatus, BlockedOrders,
// SkipGap and ReplayOrder are those of the account domain's AccountStatus,
// BlockedAccounts, SkipAccountGap and ReplayAccount).
func domainDeadlines(f Functions) map[string]time.Duration {
	return map[string]time.Duration{
		f.Status:  ReadDeadline,
		f.Blocked: ReadDeadline,
		f.Skip:    SkipDeadline,
		f.Replay:  ReplayDeadline,
	}
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
