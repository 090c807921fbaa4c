// Package handler is the Azure Functions custom handler: an echo server with
// one route per function (the route is the function's folder name under
// functions/), which turns host invocations into domain calls and domain
// errors into host outcomes.
package handler

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/metrics"
)

// Function names: folder names under functions/, and so invocation routes.
// Those of each domain derive from it (FunctionsOf); the order domain's
// are named here too, for the tests and tools that call them.
const (
	FnLedgerIngest = "LedgerIngest"
	FnLedgerUpload = "LedgerUpload"
	FnReplayAll    = "ReplayDeadLetters"
	FnAutoReplay   = "AutoReplay"
	FnSummary      = "HealthSummary"
	FnDashboard    = "Dashboard"

	FnOrderProcessor = "OrderProcessor"
	FnOrderStatus    = "OrderStatus"
	FnBlockedOrders  = "BlockedOrders"
	FnReplayOrder    = "ReplayOrder"
	FnSkipGap        = "SkipGap"
)

// Deps are what the server needs; Logger and MaxRequestBytes have defaults.
type Deps struct {
	// Domains are the domains served, in their registered order: the first
	// is the default of the functions that take ?domain=.
	Domains         []Domain
	Ledgers         LedgerPublisher
	Logger          *slog.Logger
	MaxRequestBytes int64         // default DefaultMaxRequestBytes
	LagWindow       time.Duration // the lag status's window; default convoy.DefaultLagWindow
	// Deadlines replace the deadlines of the functions they name (default:
	// deadlines.go's, which serve uses).
	Deadlines map[string]time.Duration
	// Metrics records the OpenTelemetry instruments (docs/tracing.md,
	// "Metrics"); nil: metrics are off, and nothing is recorded.
	Metrics *metrics.Recorder
	// LedgersQueue names the ledgers queue in the metrics' attributes;
	// default "ledgers".
	LedgersQueue string
}

// DefaultMaxRequestBytes bounds a request's body when Deps does not (the
// setting MaxRequestBytes): an uploaded ledger is held in memory while it is
// published (the live heap peaks at under twice its size,
// docs/performance.md), and 64 MiB keeps that well within a 2,048 MB Flex
// Consumption instance; larger ledgers go through `convoy publish --direct`.
const DefaultMaxRequestBytes = 64 << 20

type server struct {
	Deps
	domains []*served // Deps.Domains, in order
	// processors are the domains by their processor function's name.
	processors map[string]*served
	// consumers and publishers record the metrics of the functions they
	// are keyed by (all nil when metrics are off).
	consumers  map[string]*metrics.Consumer
	publishers map[string]*metrics.Publisher
}

// New returns the echo server of the custom handler.
func New(d Deps) *echo.Echo {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.MaxRequestBytes <= 0 {
		d.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if d.LagWindow <= 0 {
		d.LagWindow = convoy.DefaultLagWindow
	}
	if d.LedgersQueue == "" {
		d.LedgersQueue = "ledgers"
	}
	s := &server{Deps: d, domains: servedDomains(d.Domains, d.Metrics), processors: map[string]*served{},
		consumers: map[string]*metrics.Consumer{FnLedgerIngest: d.Metrics.Consumer(FnLedgerIngest, d.LedgersQueue)}}
	all := make(map[string]time.Duration, len(deadlines))
	maps.Copy(all, deadlines)
	for _, sd := range s.domains {
		maps.Copy(all, domainDeadlines(sd.fns))
		s.processors[sd.fns.Processor] = sd
		s.consumers[sd.fns.Processor] = sd.consumer
	}
	maps.Copy(all, d.Deadlines)
	s.Deadlines = all
	// A ledger's messages go to the queues of their domains.
	queues := make([]string, len(s.domains))
	for i, sd := range s.domains {
		queues[i] = sd.Queue
	}
	s.publishers = map[string]*metrics.Publisher{
		FnLedgerIngest: d.Metrics.Publisher(FnLedgerIngest, queues...),
		FnLedgerUpload: d.Metrics.Publisher(FnLedgerUpload, queues...),
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisablePrintStack: true,
		// A panic fails that invocation only: log it and let handleError answer 500.
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.Logger.Error("panic in invocation", "path", c.Path(), "error", err, "stack", string(stack))
			return fault.Wrap(fault.Internal, err, "the handler failed")
		},
	}))
	e.Use(s.limitBody)

	// The host's readiness probe: any response will do; answer JSON anyway.
	e.GET("/", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ready"}) })

	e.POST("/"+FnLedgerIngest, s.invocation(FnLedgerIngest, s.ingestLedger))
	e.POST("/"+FnAutoReplay, s.invocation(FnAutoReplay, s.autoReplay))

	// HTTP functions: invoked as POST /<Name> with an envelope, or, with
	// enableForwardingHttpRequest, forwarded as the original request.
	for _, d := range s.domains {
		f := d.fns
		e.POST("/"+f.Processor, s.invocation(f.Processor, s.processKeys(d)))
		s.httpFunction(e, f.Status, http.MethodGet, echoRoute(f.StatusRoute), s.keyStatus(d))
		s.httpFunction(e, f.Blocked, http.MethodGet, echoRoute(f.BlockedRoute), s.blockedKeys(d))
		s.httpFunction(e, f.Replay, http.MethodPost, echoRoute(f.ReplayRoute), s.replayKey(d))
		s.httpFunction(e, f.Skip, http.MethodPost, echoRoute(f.SkipRoute), s.skipGap(d))
	}
	s.httpFunction(e, FnLedgerUpload, http.MethodPost, "/api/ledgers", s.uploadLedger)
	s.httpFunction(e, FnReplayAll, http.MethodPost, "/api/deadletters/replay", s.replayDeadLetters)
	s.httpFunction(e, FnSummary, http.MethodGet, "/api/summary", s.summary)
	s.httpFunction(e, FnDashboard, http.MethodGet, "/api/dashboard", s.dashboard)
	return e
}

// limitBody bounds every request body; reading past it is a TooLarge fault.
func (s *server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > s.MaxRequestBytes {
			return tooLarge(s.MaxRequestBytes)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, s.MaxRequestBytes)
		return next(c)
	}
}

func tooLarge(limit int64) error {
	return fault.Errorf(fault.TooLarge, "request body is larger than %d bytes (setting MaxRequestBytes)", limit)
}

// readBody reads the request body, classifying an over-limit body.
func (s *server) readBody(c echo.Context) ([]byte, error) {
	var buf bytes.Buffer
	if n := c.Request().ContentLength; n > 0 && n <= s.MaxRequestBytes {
		buf.Grow(int(n) + bytes.MinRead) // one read past the end sees EOF without growing
	}
	_, err := buf.ReadFrom(c.Request().Body)
	body := buf.Bytes()
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge(tooBig.Limit)
	case err != nil:
		return nil, fault.Wrap(fault.Invalid, err, "cannot read request body")
	}
	return body, nil
}

// statusOf is the one table from error class to HTTP status.
var statusOf = map[fault.Code]int{
	fault.Invalid:     http.StatusBadRequest,
	fault.NotFound:    http.StatusNotFound,
	fault.Conflict:    http.StatusConflict,
	fault.TooLarge:    http.StatusRequestEntityTooLarge,
	fault.Unavailable: http.StatusServiceUnavailable,
	fault.Internal:    http.StatusInternalServerError,
}

// ErrorBody is the JSON of every HTTP error response (docs/contract.md).
type ErrorBody struct {
	Error    string          `json:"error"`
	Problems []fault.Problem `json:"problems,omitempty"`
}

// errorResponse maps err to its status and JSON body.
func errorResponse(err error) (int, ErrorBody) {
	var he *echo.HTTPError
	if errors.As(err, &he) { // routing errors: 404, 405
		return he.Code, ErrorBody{Error: fmt.Sprint(he.Message)}
	}
	status, ok := statusOf[fault.CodeOf(err)]
	if !ok { // a code missing from the table is a bug: never status 0, which net/http panics on
		status = http.StatusInternalServerError
	}
	msg := fault.MessageOf(err)
	if status == http.StatusInternalServerError {
		msg = "internal error" // details go to the log, not to callers
	}
	return status, ErrorBody{Error: msg, Problems: fault.ProblemsOf(err)}
}

// handleError is echo's central error handler: every error leaves as JSON.
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body := errorResponse(err)
	var he *echo.HTTPError
	if errors.As(err, &he) && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) {
		// echo's routing errors say only "Not Found": name what was asked.
		r := c.Request()
		body.Error = fmt.Sprintf("no function answers %s %s", r.Method, r.URL.Path)
		if allow := c.Response().Header().Get(echo.HeaderAllow); status == http.StatusMethodNotAllowed && allow != "" {
			body.Error += " (allowed: " + allow + ")"
		}
	}
	if status >= 500 {
		s.Logger.Error("request failed", "path", c.Request().URL.Path, "status", status, "error", err)
	}
	_ = c.JSON(status, body)
}
