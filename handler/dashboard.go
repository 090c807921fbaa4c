package handler

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/tracing"
)

// summary is HealthSummary: GET /api/summary.
func (s *server) summary(ctx context.Context, r httpRequest) (int, any, error) {
	if err := onlyFunctionKey(r.Query, "the summary"); err != nil {
		return 0, nil, err
	}
	if s.Heal == nil {
		return 0, nil, fault.Errorf(fault.Internal, "the summary is not configured")
	}
	sum, err := s.Heal.Summarize(ctx)
	if err != nil {
		return 0, nil, fault.Wrap(fault.Unavailable, err, "storage is unavailable")
	}
	return http.StatusOK, sum, nil
}

// onlyFunctionKey refuses every query parameter but code: the function key
// the host authenticated the call with (authLevel: function), which it
// forwards to the handler. The dashboard is opened with it, and a client
// may send it with every call.
func onlyFunctionKey(q url.Values, what string) error {
	for k := range q {
		if k != "code" {
			return fault.Errorf(fault.Invalid, "%s takes no query parameter %q (only the function key, code)", what, cut(k))
		}
	}
	return nil
}

//go:embed dashboard.html
var dashboardPage string

// dashboardHeaders are the dashboard's response headers: it may not be
// framed (clickjacking of its replay and skip buttons), and it may run only
// its own inline script and style and call its own origin.
var dashboardHeaders = map[string]string{
	"X-Frame-Options":         "DENY",
	"X-Content-Type-Options":  "nosniff",
	"Cache-Control":           "no-store",
	"Content-Security-Policy": dashboardPolicy(dashboardPage),
}

// dashboardPolicy is the page's Content-Security-Policy: nothing but its
// inline <script> and <style> elements, by hash, and requests to its origin.
func dashboardPolicy(page string) string {
	return "default-src 'none'; script-src " + inlineHashes(page, "script") + "; style-src " + inlineHashes(page, "style") +
		"; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// inlineHashes are the CSP hash sources of page's <tag> elements.
func inlineHashes(page, tag string) string {
	var out []string
	for rest := page; ; {
		i := strings.Index(rest, "<"+tag+">")
		if i < 0 {
			break
		}
		rest = rest[i+len(tag)+2:]
		j := strings.Index(rest, "</"+tag+">")
		if j < 0 {
			break
		}
		sum := sha256.Sum256([]byte(rest[:j]))
		out = append(out, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		rest = rest[j:]
	}
	if len(out) == 0 {
		return "'none'"
	}
	return strings.Join(out, " ")
}

// dashboard is Dashboard: GET /api/dashboard, one self-contained page; with
// ?parked=<orderId>, the order's parked window as JSON (parkedWindow).
func (s *server) dashboard(ctx context.Context, r httpRequest) (int, any, error) {
	if _, ok := r.Query["parked"]; ok {
		return s.parkedWindow(ctx, r.Query)
	}
	if err := onlyFunctionKey(r.Query, "the dashboard"); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, withHeaders{Body: htmlPage(dashboardPage), Headers: dashboardHeaders}, nil
}

// htmlPage is an httpFunc body sent as text/html rather than JSON.
type htmlPage string

// parkedAnswer is the parked window of an order, as the order's page shows
// it: the lowest parked messages the store's Load reads with the head (at
// most convoy.ParkedLoadSize, in seq order), and how many are parked in all.
type parkedAnswer struct {
	OrderID    string `json:"orderId"`
	Parked     int    `json:"parked"` // in the window and beyond it
	MissingSeq int64  `json:"missingSeq,omitempty"`
	// WindowSize is the most Messages holds (convoy.ParkedLoadSize).
	WindowSize int             `json:"windowSize"`
	Messages   []parkedMessage `json:"messages"`
}

// parkedMessage is one parked message: its seq, Service Bus message id,
// when Service Bus enqueued it and the trace id of the context it carried
// ("" and left out when unknown, or when it carried none usable).
type parkedMessage struct {
	Seq        int64  `json:"seq"`
	MessageID  string `json:"messageId"`
	EnqueuedAt string `json:"enqueuedAt,omitempty"`
	TraceID    string `json:"traceId,omitempty"`
}

// parkedWindow is Dashboard's GET /api/dashboard?parked=<orderId>[&code=<key>]:
// the order's parked window (parkedAnswer), one read of the order's head
// and first parked rows. An order without state is a 404, an invalid id a
// 400, as OrderStatus answers them. The JSON routes' answers stay as they
// are (issue 43): the order's page reads this besides OrderStatus.
func (s *server) parkedWindow(ctx context.Context, q url.Values) (int, any, error) {
	for k := range q {
		if k != "code" && k != "parked" {
			return 0, nil, fault.Errorf(fault.Invalid, "the parked window takes no query parameter %q (only parked and the function key, code)", cut(k))
		}
	}
	if n := len(q["parked"]); n != 1 {
		return 0, nil, fault.Errorf(fault.Invalid, "parked is given %d times: want one order id", n)
	}
	id := q.Get("parked")
	if err := operator.CheckOrderID(id); err != nil {
		return 0, nil, err
	}
	if s.Orders == nil {
		return 0, nil, fault.Errorf(fault.Internal, "the parked window is not configured")
	}
	o, err := s.Orders.Load(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if o.Version == 0 {
		return 0, nil, fault.Errorf(fault.NotFound, "order %q has no state", id)
	}
	seqs := slices.Sorted(maps.Keys(o.Parked))
	seqs = seqs[:min(len(seqs), convoy.ParkedLoadSize)]
	a := parkedAnswer{OrderID: id, Parked: o.ParkedCount, MissingSeq: o.MissingSeq(), WindowSize: convoy.ParkedLoadSize,
		Messages: make([]parkedMessage, 0, len(seqs))}
	for _, seq := range seqs {
		m := o.Parked[seq]
		p := parkedMessage{Seq: seq, MessageID: m.MessageID}
		if !m.EnqueuedAt.IsZero() {
			p.EnqueuedAt = m.EnqueuedAt.UTC().Format(time.RFC3339)
		}
		if sc, err := tracing.ParseTraceParent(m.TraceParent); m.TraceParent != "" && err == nil {
			p.TraceID = sc.TraceID().String()
		}
		a.Messages = append(a.Messages, p)
	}
	return http.StatusOK, a, nil
}
