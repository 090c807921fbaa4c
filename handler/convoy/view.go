package convoy

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"encoding/json"

	"github.com/convoy-dev/convoy/handler/fault"
)

// View is an order's state as OrderStatus returns it (docs/contract.md): the
// head and one page of its transactions and of its rejections.
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
	// Continuation is present when more transactions or rejections follow
	// this page: pass it back as ?continuation=<token>.
	Continuation string `json:"continuation,omitempty"`
}

// View returns o's head as OrderStatus shows it, without its history
// (empty transactions and rejected): ReadView adds a page of it.
func (o *Order) View() View {
	v := View{
		OrderID: o.ID, Status: o.Status, Complete: o.Complete, Currency: o.Currency, Data: o.Data, AppliedSeq: o.AppliedSeq,
		Parked: o.ParkedCount, MissingSeq: o.MissingSeq(), Transactions: []TxEntry{},
		Total: o.TotalAmount, Rejected: []Rejection{}, UpdatedAt: timestamp(o.UpdatedAt),
	}
	if !o.BlockedSince.IsZero() {
		v.BlockedSince = timestamp(o.BlockedSince)
	}
	return v
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Page sizes of ReadView: transactions and rejections per page, each.
const (
	DefaultHistoryPageSize = 1000
	MaxHistoryPageSize     = 1000
)

// HistoryCursor is where a page of an order's history starts: the position
// of the next transaction and the seq of the next rejection; -1 when that
// list is done.
type HistoryCursor struct {
	Tx, Rejected int64
}

const cursorVersion = "h1"

// Token returns the cursor as a continuation token.
func (c HistoryCursor) Token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + "." + strconv.FormatInt(c.Tx, 10) + "." + strconv.FormatInt(c.Rejected, 10)))
}

// maxTokenLength bounds a continuation token: two int64s and a prefix, encoded.
const maxTokenLength = 64

// ParseHistoryCursor reads a continuation token that Token issued; anything
// else is an Invalid error that says so.
func ParseHistoryCursor(token string) (HistoryCursor, error) {
	bad := fault.Errorf(fault.Invalid, "continuation is not a token this service issued")
	if len(token) > maxTokenLength {
		return HistoryCursor{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return HistoryCursor{}, bad
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[0] != cursorVersion {
		return HistoryCursor{}, bad
	}
	var n [2]int64
	for i, p := range parts[1:] {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < -1 || strconv.FormatInt(v, 10) != p {
			return HistoryCursor{}, bad
		}
		n[i] = v
	}
	c := HistoryCursor{Tx: n[0], Rejected: n[1]}
	if c.Tx == -1 && c.Rejected == -1 {
		return HistoryCursor{}, bad // a token is issued only while something follows
	}
	return c, nil
}

// HeadReader reads an order's head (Store.Load).
type HeadReader interface {
	Load(ctx context.Context, orderID string) (*Order, error)
}

// ReadView returns the order's head and a page of its history: the first
// page when continuation is "", else the page the token names; pageSize
// transactions and rejections at most (1-MaxHistoryPageSize; 0: the
// default). An order without state is a NotFound error. Each page reads the
// head afresh: figures are as of that read, and a page that follows sees
// the transactions and rejections added in between.
func ReadView(ctx context.Context, s HeadReader, h History, orderID, continuation string, pageSize int) (View, error) {
	if pageSize == 0 {
		pageSize = DefaultHistoryPageSize
	}
	if pageSize < 1 || pageSize > MaxHistoryPageSize {
		return View{}, fault.Errorf(fault.Invalid, "pageSize %d is not between 1 and %d", pageSize, MaxHistoryPageSize)
	}
	cur := HistoryCursor{}
	if continuation != "" {
		var err error
		if cur, err = ParseHistoryCursor(continuation); err != nil {
			return View{}, err
		}
	}
	o, err := s.Load(ctx, orderID)
	if err != nil {
		return View{}, err
	}
	if o.Version == 0 {
		return View{}, fault.Errorf(fault.NotFound, "order %q has no state", orderID)
	}
	v := o.View()
	next := HistoryCursor{Tx: -1, Rejected: -1}
	if cur.Tx >= 0 {
		txs, more, err := h.Transactions(ctx, orderID, cur.Tx, pageSize)
		if err != nil {
			return View{}, fmt.Errorf("read the transactions of order %q: %w", orderID, err)
		}
		v.Transactions = append(v.Transactions, txs...)
		// The head counts the transactions: a page that reaches the count is
		// the last, whatever the store says (a query page that is full may
		// announce a next one that proves empty).
		if more && cur.Tx+int64(len(txs)) < o.TxCount {
			next.Tx = cur.Tx + int64(len(txs))
		}
	}
	if cur.Rejected >= 0 {
		rs, more, err := h.Rejections(ctx, orderID, cur.Rejected, pageSize)
		if err != nil {
			return View{}, fmt.Errorf("read the rejections of order %q: %w", orderID, err)
		}
		v.Rejected = append(v.Rejected, rs...)
		if more && len(rs) > 0 {
			next.Rejected = rs[len(rs)-1].Seq + 1
		}
	}
	if next.Tx >= 0 || next.Rejected >= 0 {
		v.Continuation = next.Token()
	}
	return v, nil
}
