package accounts

import (
	"time"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// History implements keyed.Viewer: the entries, by position.
func (Rules) History(s State) (string, int64) { return byPosition, s.Entries }

// View is an account as the read routes answer it: the head, its state, and
// one page of its entries and of its rejections.
type View struct {
	AccountID    string      `json:"accountId"`
	Status       Status      `json:"status"`
	Currency     string      `json:"currency,omitempty"` // not before the open
	Limit        int64       `json:"limit"`
	Balance      int64       `json:"balance"`
	Complete     bool        `json:"complete"` // a command marked last was applied or rejected: later seqs are refused
	AppliedSeq   int64       `json:"appliedSeq"`
	Parked       int         `json:"parked"`
	MissingSeq   int64       `json:"missingSeq,omitempty"`
	BlockedSince string      `json:"blockedSince,omitempty"`
	Entries      []Entry     `json:"entries"`
	Rejected     []Rejection `json:"rejected"`
	UpdatedAt    string      `json:"updatedAt"`
	// Failing is present while the decision of the account's next seq
	// fails: its message is retried, then dead-lettered, and the account waits.
	Failing *Failing `json:"failing,omitempty"`
	// Continuation is present when more entries or rejections follow this
	// page: pass it back as ?continuation=<token>.
	Continuation string `json:"continuation,omitempty"`
}

// Entry is one entry of an account, in the order applied: what it moved
// (signed: a deposit and a withdrawal's reversal add, a withdrawal and a
// deposit's reversal take away) and the balance it left.
type Entry struct {
	Reference string `json:"reference"`
	Kind      Kind   `json:"kind"`
	Amount    int64  `json:"amount"`
	Balance   int64  `json:"balance"`
	Reverses  string `json:"reverses,omitempty"`
}

// Rejection is a command that broke a rule: it consumed its seq and had no
// effect. A seq an operator skipped has no kind (its message was never read).
type Rejection struct {
	Seq       int64  `json:"seq"`
	Kind      Kind   `json:"kind,omitempty"`
	Reference string `json:"reference,omitempty"`
	Reason    string `json:"reason"`
}

// Failing is a decision that fails: the seq, the error and when it last did.
type Failing struct {
	Seq   int64  `json:"seq"`
	Error string `json:"error"`
	At    string `json:"at"`
}

// View implements keyed.Viewer.
func (Rules) View(h keyed.Head, s State, page keyed.Page) any {
	v := View{
		AccountID: h.ID, Status: s.Status, Currency: s.Currency, Limit: s.Limit, Balance: s.Balance,
		Complete: h.Complete, AppliedSeq: h.AppliedSeq, Parked: h.Parked, MissingSeq: h.MissingSeq,
		Entries: make([]Entry, 0, len(page.Rows)), Rejected: make([]Rejection, 0, len(page.Rejected)),
		UpdatedAt: timestamp(h.UpdatedAt), Continuation: page.Continuation,
	}
	if !h.BlockedSince.IsZero() {
		v.BlockedSince = timestamp(h.BlockedSince)
	}
	if f := h.Failing; f != nil {
		v.Failing = &Failing{Seq: f.Seq, Error: f.Why, At: timestamp(f.At)}
	}
	for _, r := range page.Rows {
		v.Entries = append(v.Entries, Entry{Reference: r.Props.String("Reference"), Kind: Kind(r.Props.String("Kind")),
			Amount: r.Props.Int("Amount"), Balance: r.Props.Int("Balance"), Reverses: r.Props.String("Reverses")})
	}
	for _, r := range page.Rejected {
		v.Rejected = append(v.Rejected, Rejection{Seq: r.Seq, Kind: Kind(r.Tag.String("Kind")),
			Reference: r.Tag.String("Reference"), Reason: r.Reason})
	}
	return v
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
