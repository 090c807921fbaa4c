package handler

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// LedgerPublisher de-batches ledgers (ledger.Publisher).
type LedgerPublisher interface {
	Publish(ctx context.Context, doc []byte) (ledger.Summary, error)
	PublishQueued(ctx context.Context, doc []byte, sessionID string) (ledger.Summary, error)
	RecordRejection(ctx context.Context, doc []byte, rejection error) (*ledger.Record, error)
}

// ingestLedger is LedgerIngest: a ledger from the ledgers queue, whose
// session is the ledger's stream (the host hands this instance the stream's
// ledgers one at a time, in the order they were sent). A published
// (or already published) ledger completes the message; so does a bad one,
// once recorded, since redelivering it could never help. Only a transient
// failure fails the invocation, so that Service Bus redelivers the ledger and
// publishing resumes from its checkpoint.
func (s *server) ingestLedger(ctx context.Context, c *call) (map[string]any, error) {
	msgs, err := c.req.ServiceBusMessages("ledger")
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "unreadable Service Bus trigger payload")
	}
	for _, m := range msgs {
		sum, err := s.Ledgers.PublishQueued(ctx, m.Body, m.SessionID)
		switch fault.CodeOf(err) {
		case "":
			c.outcome(slog.LevelInfo, "ledger "+sum.Outcome, "ledgerId", sum.LedgerID, "stream", m.SessionID, "messageId", m.MessageID,
				"transactions", sum.Transactions, "orders", sum.Orders, "messages", sum.Messages)
		case fault.Invalid, fault.TooLarge:
			rec, rerr := s.Ledgers.RecordRejection(ctx, m.Body, err)
			if rerr != nil {
				return nil, rerr
			}
			c.outcome(slog.LevelWarn, "ledger rejected", "ledgerId", rec.ID, "stream", m.SessionID, "messageId", m.MessageID,
				"problems", len(rec.Problems), "error", fault.MessageOf(err))
		case fault.Conflict:
			c.outcome(slog.LevelError, "ledger rejected: its id was used for other content", "ledgerId", sum.LedgerID,
				"messageId", m.MessageID, "error", fault.MessageOf(err))
		default:
			return nil, err
		}
	}
	return nil, nil
}

// uploadLedger is LedgerUpload: POST /api/ledgers. 202 when the ledger was
// published now, 200 when it had been already; 400 with every problem, 409
// when its id was used for other content, 413 too large, 503 retry later.
func (s *server) uploadLedger(ctx context.Context, r httpRequest) (int, any, error) {
	if len(bytes.TrimSpace(r.Body)) == 0 {
		return 0, nil, fault.Errorf(fault.Invalid, "the request body is empty: send the ledger as a JSON body with a Content-Length header "+
			"(the Functions host forwards a body only when Content-Length is above 0, so a chunked upload arrives empty)")
	}
	sum, err := s.Ledgers.Publish(ctx, r.Body)
	if err != nil {
		return 0, nil, err
	}
	if sum.Outcome == ledger.OutcomeAlreadyPublished {
		return http.StatusOK, sum, nil
	}
	return http.StatusAccepted, sum, nil
}
