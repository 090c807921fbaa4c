package handler

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/convoy-dev/convoy/handler/fault"
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

// dashboard is Dashboard: GET /api/dashboard, one self-contained page.
func (s *server) dashboard(_ context.Context, r httpRequest) (int, any, error) {
	if err := onlyFunctionKey(r.Query, "the dashboard"); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, withHeaders{Body: htmlPage(dashboardPage), Headers: dashboardHeaders}, nil
}

// htmlPage is an httpFunc body sent as text/html rather than JSON.
type htmlPage string
