package ledgertest

import (
	"context"
	"sync"

	"github.com/convoy-dev/convoy/handler/ledger"
)

// Size is a message's size as sent alone (convoy.OrderMessage.Size, which
// the servicebus tests check against the SDK).
func Size(m ledger.Message) int { return m.Size() }

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

// Add implements ledger.Batch, counting as azservicebus does: the first
// message's envelope once, then each message's payload.
func (b *Batch) Add(m ledger.Message) error {
	size := m.PayloadBytes()
	if len(b.Messages) == 0 {
		size += m.EnvelopeBytes()
	}
	if b.Bytes+size > b.limit {
		return ledger.ErrBatchFull
	}
	b.Messages = append(b.Messages, m)
	b.Bytes += size
	return nil
}

// Len implements ledger.Batch.
func (b *Batch) Len() int { return len(b.Messages) }
