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
	"github.com/convoy-dev/convoy/handler/keyed"
)

// View is a key as the read routes answer it (docs/contract.md): its head
// as read, and one page of its history. Its JSON is its domain's View.
type View struct {
	Order *Key       // the head and the domain's state, as read
	Page  keyed.Page // a page of its history
}

// MarshalJSON writes the domain's View of the key.
func (v View) MarshalJSON() ([]byte, error) { return json.Marshal(v.Value()) }

// Value is the domain's View of the key (what MarshalJSON writes).
func (v View) Value() any {
	o := v.Order
	if o == nil || o.domain == nil || o.State == nil && o.Decode() != nil {
		return nil
	}
	return o.domain.View(o.Head(), o.State, v.Page)
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Page sizes of ReadView: transactions and rejections per page, each.
const (
	DefaultHistoryPageSize = 1000
	MaxHistoryPageSize     = 1000
)

// HistoryCursor is where a page of a key's history starts: the position
// of the next row of its History collection and the seq of the next
// rejection; -1 when that list is done.
type HistoryCursor struct {
	Rows, Rejected int64
}

const cursorVersion = "h1"

// Token returns the cursor as a continuation token.
func (c HistoryCursor) Token() string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + "." + strconv.FormatInt(c.Rows, 10) + "." + strconv.FormatInt(c.Rejected, 10)))
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
	c := HistoryCursor{Rows: n[0], Rejected: n[1]}
	if c.Rows == -1 && c.Rejected == -1 {
		return HistoryCursor{}, bad // a token is issued only while something follows
	}
	return c, nil
}

// HeadReader reads a key's head (Store.Load).
type HeadReader interface {
	Load(ctx context.Context, orderID string) (*Key, error)
}

// ReadView returns the key's head and a page of its history: the first
// page when continuation is "", else the page the token names; pageSize
// rows and rejections at most (1-MaxHistoryPageSize; 0: the default). A key
// without state is a NotFound error. Each page reads the head afresh:
// figures are as of that read, and a page that follows sees the rows and
// rejections added in between.
func ReadView(ctx context.Context, d keyed.Domain, s HeadReader, h History, orderID, continuation string, pageSize int) (View, error) {
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
		return View{}, fault.Errorf(fault.NotFound, "%s %q has no state", d.Noun(), orderID)
	}
	if _, err := o.Bind(d); err != nil {
		return View{}, err
	}
	v := View{Order: o, Page: keyed.Page{Rows: []keyed.Row{}, Rejected: []keyed.Rejected{}}}
	next := HistoryCursor{Rows: -1, Rejected: -1}
	coll, count := d.History(o.State)
	if cur.Rows >= 0 && coll != "" {
		rows, more, err := h.Rows(ctx, orderID, coll, cur.Rows, pageSize)
		if err != nil {
			return View{}, fmt.Errorf("read the history of %s %q: %w", d.Noun(), orderID, err)
		}
		v.Page.Rows = append(v.Page.Rows, rows...)
		// The state counts the rows: a page that reaches the count is the
		// last, whatever the store says (a query page that is full may
		// announce a next one that proves empty).
		if more && cur.Rows+int64(len(rows)) < count {
			next.Rows = cur.Rows + int64(len(rows))
		}
	}
	if cur.Rejected >= 0 {
		rs, more, err := h.Rejections(ctx, orderID, cur.Rejected, pageSize)
		if err != nil {
			return View{}, fmt.Errorf("read the rejections of %s %q: %w", d.Noun(), orderID, err)
		}
		v.Page.Rejected = append(v.Page.Rejected, rs...)
		if more && len(rs) > 0 {
			next.Rejected = rs[len(rs)-1].Seq + 1
		}
	}
	if next.Rows >= 0 || next.Rejected >= 0 {
		v.Page.Continuation = next.Token()
	}
	return v, nil
}
