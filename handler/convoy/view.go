package convoy

import (
	"encoding/json"
	"time"
)

// View is an order's state as OrderStatus returns it (docs/contract.md).
type View struct {
	OrderID      string          `json:"orderId"`
	Status       Status          `json:"status"`
	Complete     bool            `json:"complete"`
	Currency     string          `json:"currency"`
	Data         json.RawMessage `json:"data,omitempty"`
	AppliedSeq   int64           `json:"appliedSeq"`
	Parked       int             `json:"parked"`
	MissingSeq   int64           `json:"missingSeq,omitempty"`
	BlockedSince string          `json:"blockedSince,omitempty"`
	Transactions []TxEntry       `json:"transactions"`
	Total        int64           `json:"total"`
	Rejected     []Rejection     `json:"rejected"`
	UpdatedAt    string          `json:"updatedAt"`
}

// View returns o as OrderStatus shows it.
func (o *Order) View() View {
	v := View{
		OrderID: o.ID, Status: o.Status, Complete: o.Complete, Currency: o.Currency, Data: o.Data, AppliedSeq: o.AppliedSeq,
		Parked: len(o.Parked), MissingSeq: o.MissingSeq(), Transactions: append([]TxEntry{}, o.Transactions...),
		Total: o.Total(), Rejected: append([]Rejection{}, o.Rejected...), UpdatedAt: timestamp(o.UpdatedAt),
	}
	if !o.BlockedSince.IsZero() {
		v.BlockedSince = timestamp(o.BlockedSince)
	}
	return v
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
