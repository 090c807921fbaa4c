package handler

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/tracing"
)

// summary is HealthSummary: GET /api/summary[?domain=<Name>], the summary
// of a domain (default: the first), which it names.
func (s *server) summary(ctx context.Context, r httpRequest) (int, any, error) {
	if err := onlyDomainAndKey(r.Query, "the summary"); err != nil {
		return 0, nil, err
	}
	d, err := s.selected(r.Query)
	if err != nil {
		return 0, nil, err
	}
	if d.Heal == nil {
		return 0, nil, fault.Errorf(fault.Internal, "the summary of %s is not configured", d.fns.Name)
	}
	sum, err := d.Heal.Summarize(ctx)
	if err != nil {
		return 0, nil, fault.Wrap(fault.Unavailable, err, "storage is unavailable")
	}
	return http.StatusOK, summaryAnswer{Domain: d.fns.Name, Summary: sum}, nil
}

// summaryAnswer is HealthSummary's answer: the domain it sums up, then its
// summary.
type summaryAnswer struct {
	Domain string `json:"domain"`
	heal.Summary
}

// onlyDomainAndKey refuses every query parameter but domain and code: the
// function key the host authenticated the call with (authLevel: function),
// which it forwards to the handler. The dashboard is opened with it, and a
// client may send it with every call.
func onlyDomainAndKey(q url.Values, what string) error {
	for k := range q {
		if k != "code" && k != domainParam {
			return fault.Errorf(fault.Invalid, "%s takes no query parameter %q (only domain, and the function key, code)", what, cut(k))
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

// dashboard is Dashboard: GET /api/dashboard[?domain=<Name>], one
// self-contained page of a domain (default: the first), which links to the
// others; with ?parked=<id>, the key's parked window as JSON
// (parkedWindow).
func (s *server) dashboard(ctx context.Context, r httpRequest) (int, any, error) {
	if _, ok := r.Query["parked"]; ok {
		return s.parkedWindow(ctx, r.Query)
	}
	if err := onlyDomainAndKey(r.Query, "the dashboard"); err != nil {
		return 0, nil, err
	}
	d, err := s.selected(r.Query)
	if err != nil {
		return 0, nil, err
	}
	page, err := s.dashboardOf(d)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, withHeaders{Body: page, Headers: dashboardHeaders}, nil
}

// dashboardDomain is what the page knows of a domain: its names, and the
// routes of its functions relative to the page (/api/dashboard: the host's
// routes), with {id} for a key's id.
type dashboardDomain struct {
	Name    string `json:"name"`
	Noun    string `json:"noun"`
	IDName  string `json:"idName"`
	Blocked string `json:"blocked"` // "orders"
	Status  string `json:"status"`  // "orders/{id}"
	Replay  string `json:"replay"`
	Skip    string `json:"skip"`
}

// dashboardConfig is the page's data: the domains and the one shown.
type dashboardConfig struct {
	Domain  string            `json:"domain"`
	Domains []dashboardDomain `json:"domains"`
}

// configMark is where the page takes its data: an element the server fills
// (a script of type application/json, which nothing runs, so that the
// page's Content-Security-Policy, which hashes the scripts run, holds).
const configMark = `<script type="application/json" id="config">{}</script>`

// dashboardOf is the page showing d, the domains it serves in its selector.
func (s *server) dashboardOf(d *served) (htmlPage, error) {
	cfg := dashboardConfig{Domain: d.fns.Name}
	for _, x := range s.domains {
		f := x.fns
		page := func(route string) string { return strings.Replace(route, "{"+f.IDName+"}", "{id}", 1) }
		cfg.Domains = append(cfg.Domains, dashboardDomain{Name: f.Name, Noun: f.Noun, IDName: f.IDName,
			Blocked: page(f.BlockedRoute), Status: page(f.StatusRoute), Replay: page(f.ReplayRoute), Skip: page(f.SkipRoute)})
	}
	data, err := json.Marshal(cfg) // escapes <, > and &: it cannot end the element
	if err != nil {
		return "", err
	}
	return htmlPage(strings.Replace(dashboardPage, configMark, strings.Replace(configMark, "{}", string(data), 1), 1)), nil
}

// htmlPage is an httpFunc body sent as text/html rather than JSON.
type htmlPage string

// parkedAnswer is the parked window of a key, as the key's page shows it:
// the lowest parked messages the store's Load reads with the head (at most
// convoy.ParkedLoadSize, in seq order), and how many are parked in all. Its
// id is named as its domain names it ("orderId": operator.WithIDName).
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

// parkedWindow is Dashboard's GET
// /api/dashboard?parked=<id>[&domain=<Name>][&code=<key>]: the key's parked
// window (parkedAnswer), one read of the key's head and first parked rows.
// A key without state is a 404, an invalid id a 400, as the status function
// answers them. The JSON routes' answers stay as they are (issue 43): the
// key's page reads this besides its status.
func (s *server) parkedWindow(ctx context.Context, q url.Values) (int, any, error) {
	for k := range q {
		if k != "code" && k != "parked" && k != domainParam {
			return 0, nil, fault.Errorf(fault.Invalid, "the parked window takes no query parameter %q (only parked, domain and the function key, code)", cut(k))
		}
	}
	d, err := s.selected(q)
	if err != nil {
		return 0, nil, err
	}
	if n := len(q["parked"]); n != 1 {
		return 0, nil, fault.Errorf(fault.Invalid, "parked is given %d times: want one %s id", n, d.fns.Noun)
	}
	id := q.Get("parked")
	if err := operator.CheckID(d.Rules, id); err != nil {
		return 0, nil, err
	}
	if d.Keys == nil {
		return 0, nil, fault.Errorf(fault.Internal, "the parked window is not configured")
	}
	o, err := d.Keys.Load(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	if o.Version == 0 {
		return 0, nil, fault.Errorf(fault.NotFound, "%s %q has no state", d.fns.Noun, id)
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
	body, err := operator.WithIDName(a, d.fns.IDName)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, json.RawMessage(body), nil
}
