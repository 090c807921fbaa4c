package ledgertest

import (
	"context"
	"sync"

	"github.com/convoy-dev/convoy/handler/ledger"
)

// MessageOverhead approximates what a message adds to a batch besides its
// body, ids and property values (AMQP framing, property names).
const MessageOverhead = 96

// Size is a message's approximate size in a batch.
func Size(m ledger.Message) int {
	return len(m.Body) + len(m.MessageID) + len(m.SessionID) + len(m.LedgerID) + MessageOverhead
}

// Sender is an in-memory ledger.Sender that keeps every batch it was sent.
type Sender struct {
	MaxBatchBytes int // default 256 KiB, the Standard tier's limit
	// Fail, if set, is called before each operation ("batch", "send").
	Fail func(op string) error

	mu      sync.Mutex
	batches [][]ledger.Message
}

var _ ledger.Sender = (*Sender)(nil)

// NewBatch implements ledger.Sender.
func (s *Sender) NewBatch(context.Context) (ledger.Batch, error) {
	if s.Fail != nil {
		if err := s.Fail("batch"); err != nil {
			return nil, err
		}
	}
	limit := s.MaxBatchBytes
	if limit == 0 {
		limit = 256 << 10
	}
	return &Batch{limit: limit}, nil
}

// SendBatch implements ledger.Sender.
func (s *Sender) SendBatch(_ context.Context, b ledger.Batch) error {
	if s.Fail != nil {
		if err := s.Fail("send"); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b.(*Batch).Messages)
	return nil
}

// Batches returns what was sent, batch by batch.
func (s *Sender) Batches() [][]ledger.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]ledger.Message(nil), s.batches...)
}

// Messages returns every message sent, in order.
func (s *Sender) Messages() []ledger.Message {
	var all []ledger.Message
	for _, b := range s.Batches() {
		all = append(all, b...)
	}
	return all
}

// Batch is a Sender's batch.
type Batch struct {
	Messages []ledger.Message
	Bytes    int
	limit    int
}

// Add implements ledger.Batch.
func (b *Batch) Add(m ledger.Message) error {
	if b.Bytes+Size(m) > b.limit {
		return ledger.ErrBatchFull
	}
	b.Messages = append(b.Messages, m)
	b.Bytes += Size(m)
	return nil
}

// Len implements ledger.Batch.
func (b *Batch) Len() int { return len(b.Messages) }
