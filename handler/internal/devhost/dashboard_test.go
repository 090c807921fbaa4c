package devhost_test

import (
	"context"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/orders"
)

// chromium returns Debian's chromium, which make test installs when it is
// missing: the dashboard test is never skipped.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: `make test` installs it (apt-get install chromium); the dashboard test needs it")
	return ""
}

// headless runs chromium on url with args, after the page's scripts ran.
func headless(t *testing.T, ctx context.Context, url string, args ...string) []byte {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=15000", "--window-size=1200,900"}
	cmd := exec.CommandContext(ctx, chromium(t), append(append(base, args...), url)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return out
}

// blockedColour is the background of a blocked order's row (dashboard.html).
func blockedColour(r, g, b, _ uint32) bool {
	r, g, b = r>>8, g>>8, b>>8
	near := func(v, want uint32) bool { return v+6 >= want && v <= want+6 }
	return near(r, 0xff) && near(g, 0xd2) && near(b, 0x4d)
}

// rowBands counts the bands of the blocked rows' colour down column x.
func rowBands(img image.Image, x int) int {
	bands, in := 0, 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		if blockedColour(img.At(x, y).RGBA()) {
			in++
			continue
		}
		if in >= 10 {
			bands++
		}
		in = 0
	}
	if in >= 10 {
		bands++
	}
	return bands
}

// pageScript is the page's script in its rendered DOM: left out, what the
// page renders is what is checked, not the script's own strings.
var pageScript = regexp.MustCompile(`(?s)<script>.*?</script>`)

// statusLine is the page's status line in its rendered DOM.
var statusLine = regexp.MustCompile(`<div id="status"[^>]*>([^<]*)</div>`)

// keyedFront stands before the emulation as the Functions host's front end
// stands before the app in Azure: every /api request needs the function key,
// in the code parameter or the x-functions-key header (authLevel: function),
// else 401, and goes on as it came, code included (the host forwards it).
// It records the requests it lets through.
type keyedFront struct {
	key  string
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	path, query, header, referer string
}

func (k *keyedFront) serve(t *testing.T, backend string) *httptest.Server {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			http.NotFound(w, r)
			return
		}
		k.mu.Lock()
		k.seen = append(k.seen, seenRequest{r.URL.Path, r.URL.RawQuery, r.Header.Get("x-functions-key"), r.Referer()})
		k.mu.Unlock()
		if r.URL.Query().Get("code") != k.key && r.Header.Get("x-functions-key") != k.key {
			w.WriteHeader(http.StatusUnauthorized) // as the host answers: no body
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (k *keyedFront) requests() []seenRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]seenRequest(nil), k.seen...)
}

// TestDashboardInChromium: the dashboard of a real run, rendered by
// headless Chromium, lists every blocked order with its missing seq and
// cause, and its screenshot shows one blocked row per blocked order. It is
// opened as in Azure, /api/dashboard?code=<key> behind a front that demands
// the key: the page's own requests carry the key in the x-functions-key
// header, not in their URLs, and once loaded the address no longer holds it
// (the referer of its requests). Opened without a key (make devhost), it
// loads too. The orders' missing messages are unreadable (a permanent
// cause): no row offers replay, each offers skip. Two AutoReplay runs, the
// second after a fourth order was poisoned and a fifth (dash-gap) sent its
// seqs 1 and 3 and never its seq 2, are the trend charts' two points, as
// the test made them: 3 then 5 blocked orders and parked messages, 3 then
// 4 dead letters of a permanent cause, none transient.
func TestDashboardInChromium(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	for _, id := range []string{"dash-a", "dash-b", "dash-c"} {
		e.poison(t, id)
	}
	e.waitIdle(ctx)
	if err := e.host.FireTimer(ctx, "AutoReplay", 0); err != nil { // learns where the missing messages are
		t.Fatal(err)
	}
	e.poison(t, "dash-d")
	const gapTrace = "4bf92f3577b34da6a3ce929d0e0e4736" // dash-gap's seq 3 carries it
	gap3 := rawOrderMessage("G:2", "dash-gap", "G", 3, `{"transaction":{"orderId":"dash-gap","op":"AddTransaction","txId":"t-2","amount":5}}`)
	gap3.ApplicationProperties["traceparent"] = "00-" + gapTrace + "-00f067aa0ba902b7-01"
	e.send(ctx, "orders", rawOrderMessage("G:0", "dash-gap", "G", 1, `{"transaction":{"orderId":"dash-gap","op":"CreateOrder","currency":"EUR"}}`), gap3)
	e.waitIdle(ctx)
	if err := e.host.FireTimer(ctx, "AutoReplay", 0); err != nil {
		t.Fatal(err)
	}
	if n := len(e.blocked(t)); n != 5 {
		t.Fatalf("%d blocked orders, want 5", n)
	}
	front := &keyedFront{key: "somekey"}
	keyed := front.serve(t, e.host.URL()).URL + "/api/dashboard?code=somekey"
	for _, url := range []string{keyed, e.host.URL() + "/api/dashboard"} {
		dom := string(headless(t, ctx, url, "--dump-dom"))
		if st := statusLine.FindStringSubmatch(dom); !strings.Contains(dom, `data-ready="true"`) || st == nil || strings.HasPrefix(st[1], "Could not load") {
			t.Fatalf("%s: the page did not load its data (status %q):\n%s", url, st, tail(dom, 2000))
		}
		for _, id := range []string{"dash-a", "dash-b", "dash-c", "dash-d", "dash-gap"} {
			row := `<tr class="blocked" data-order="` + id + `"><td><a href="#order=` + id + `">` + id + `</a></td><td>2</td><td>1</td>`
			if !strings.Contains(dom, row) {
				t.Errorf("%s: no row for %s, linked to its page, with missing seq 2 and 1 parked in the rendered page", url, id)
			}
		}
		if strings.Count(dom, "permanent: unreadable") != 4 {
			t.Errorf("%s: the rows do not show the cause (permanent, unreadable)", url)
		}
		if n := strings.Count(dom, ">skip seq 2</button>"); n != 5 || strings.Count(dom, ">replay</button>") != 1 {
			t.Errorf("%s: %d skip buttons, want 5, and %d replay, want 1 (dash-gap's: the others' cause is permanent)", url, n, strings.Count(dom, ">replay</button>"))
		}
		for series, want := range map[string]string{"blockedOrders": "3 5", "parkedMessages": "3 5", "deadLettersPermanent": "3 4", "deadLettersTransient": "0 0"} {
			if got := chartPoints(dom, series); got != want {
				t.Errorf("%s: the chart's points of %s are %q, want %q (the two runs)", url, series, got, want)
			}
		}
	}
	// The order pages, linked from the list: a seq dead-lettered for a
	// permanent cause (skip only), and one never published (replay and skip);
	// each with its parked window, the message ids and trace context of the
	// seqs the test parked (dash-a's seq 3 carried none), enqueued times
	// relative with the exact time on hover.
	parkedRow := func(seq int, messageID, trace string) *regexp.Regexp {
		return regexp.MustCompile(`<tr data-seq="` + strconv.Itoa(seq) + `"><td>` + strconv.Itoa(seq) + `</td><td class="mono">` + regexp.QuoteMeta(messageID) +
			`</td><td><time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">(just now|\d+ \w+ ago)</time></td><td[^>]*>` + trace + `</td></tr>`)
	}
	window := map[string]*regexp.Regexp{"dash-a": parkedRow(3, "P-dash-a:3", "none carried"), "dash-gap": parkedRow(3, "G:2", gapTrace)}
	for id, want := range map[string][]string{
		"dash-a": {`<span id="orderTitle" class="mono">dash-a</span>`,
			`<th scope="row">applied seq</th><td>1</td>`, `<th scope="row">parked messages</th><td>1</td>`, `<th scope="row">missing seq</th><td>2</td>`,
			"It waits for seq 2. That message is in the orders queue's dead-letter sub-queue, message P-dash-a:2, dead-lettered for MaxDeliveryCountExceeded: a permanent cause (unreadable: ",
			"A replay brings it back to the same end: skip it.",
			`<p id="orderActions"><button type="button">skip seq 2</button></p>`,
			"1 message(s) parked behind seq 2, from seq 3 on, waiting for it."},
		"dash-gap": {`<span id="orderTitle" class="mono">dash-gap</span>`, `<th scope="row">missing seq</th><td>2</td>`,
			"1 message(s) parked behind seq 2, from seq 3 on, waiting for it.",
			"It waits for seq 2. That message is not in the dead-letter queue: never published",
			`<p id="orderActions"><button type="button">replay</button> <button type="button">skip seq 2</button></p>`},
	} {
		dom := pageScript.ReplaceAllString(string(headless(t, ctx, keyed+"#order="+id, "--dump-dom")), "")
		if !strings.Contains(dom, `data-ready="true"`) || !strings.Contains(dom, `<div id="overview" hidden="">`) {
			t.Errorf("the page of %s did not load, or the list is not hidden:\n%s", id, tail(dom, 3000))
			continue
		}
		for _, w := range want {
			if !strings.Contains(dom, w) {
				t.Errorf("the page of %s lacks %s", id, w)
			}
		}
		if !window[id].MatchString(dom) || strings.Count(dom, "<tr data-seq=") != 1 {
			t.Errorf("the page of %s does not show its parked window, one row matching %s:\n%s", id, window[id], tail(dom, 3000))
		}
	}
	data := map[string]bool{}
	for _, r := range front.requests() {
		if r.path == "/api/dashboard" && !strings.Contains(r.query, "parked=") {
			continue // the page itself, opened with ?code=
		}
		data[r.path] = true
		if r.header != "somekey" || strings.Contains(r.query, "somekey") {
			t.Errorf("the page requested %s?%s with x-functions-key %q: want the key in the header, not in the URL", r.path, r.query, r.header)
		}
		if strings.Contains(r.referer, "somekey") {
			t.Errorf("the page requested %s from the address %s: the key should be gone from it", r.path, r.referer)
		}
	}
	if !data["/api/summary"] || !data["/api/orders"] || !data["/api/dashboard"] {
		t.Errorf("the page requested %v behind the keyed front, want the summary, the blocked orders and a parked window", front.requests())
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if dir := os.Getenv("E2E_LOG_DIR"); dir != "" {
		shot = filepath.Join(dir, "dashboard.png")
	}
	headless(t, ctx, keyed, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// Down the left padding of the first cell (body margin 16 px, cell padding 8 px): background only.
	if n := rowBands(img, 20); n != 5 {
		t.Fatalf("the screenshot shows %d blocked rows, want 5", n)
	}
}

// chartPoint is a point of a trend chart in the rendered page.
var chartPoint = regexp.MustCompile(`<circle [^>]*data-series="(\w+)" data-at="([^"]+)" data-value="([^"]+)"`)

// chartPoints are the values of series's points in the rendered page, in
// their order, space-separated.
func chartPoints(dom, series string) string {
	var out []string
	for _, m := range chartPoint.FindAllStringSubmatch(dom, -1) {
		if m[1] == series {
			out = append(out, m[3])
		}
	}
	return strings.Join(out, " ")
}

// lagSummary is a summary as GET /api/summary answers it once an AutoReplay
// run surveyed the active orders (docs/operations.md, "Lag per order"), lag
// being lagJSON.
func lagSummary(lagJSON string) string {
	return `{"at": "2026-11-25T19:00:01Z", "blockedOrders": 4, "blockedComplete": true, "oldestBlockedSeconds": 700,
		"oldestBlockedSince": "2026-11-25T18:48:21Z", "parkedMessages": 9, "missingBy": {"deadLetter/transient": 4},
		"figuresAt": "2026-11-25T19:00:00Z", "deadLetters": {"total": 4, "byReason": {"MaxDeliveryCountExceeded": 4}, "transient": 4, "permanent": 0, "complete": true},
		"autoReplay": {"enabled": true, "replayed": 0, "pending": 4, "retrying": 0, "unreached": 0, "deferred": 0, "breakerOpen": false},
		"lag": ` + lagJSON + `}`
}

// TestDashboardShowsLag: the page's Lag section, rendered by headless
// Chromium from canned summaries (the page itself, and its headers, are the
// handler's): the counts per status, the orders stalled for two windows,
// critical time p50/p99/max with its window, and the oldest heads with their
// age readable, an order id shown as text whatever it holds, and how much of
// the active orders the figures cover (issue 37: surveyed this period, the
// oldest survey, how often each is looked at); a survey cut short, or not
// yet through every order, says its counts are partial; with no survey yet
// (lag null, or absent as from an earlier release) the page says so.
func TestDashboardShowsLag(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	var summary atomic.Value
	page := handler.New(handler.Deps{Domains: []handler.Domain{{Rules: orders.Domain}}})
	mux := http.NewServeMux()
	mux.Handle("/api/dashboard", page)
	mux.HandleFunc("/api/summary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, summary.Load().(string))
	})
	mux.HandleFunc("/api/orders", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"orders": []}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	render := func(sum string) string {
		t.Helper()
		summary.Store(sum)
		dom := string(headless(t, ctx, srv.URL+"/api/dashboard", "--dump-dom"))
		if st := statusLine.FindStringSubmatch(dom); !strings.Contains(dom, `data-ready="true"`) || st == nil || strings.HasPrefix(st[1], "Could not load") {
			t.Fatalf("the page did not load its data (status %q):\n%s", st, tail(dom, 3000))
		}
		return pageScript.ReplaceAllString(dom, "") // what it renders, not the script's own strings
	}
	lagNote := regexp.MustCompile(`(?s)<p id="lagNote"[^>]*>(.*?)</p>`)
	note := func(dom string) string {
		if m := lagNote.FindStringSubmatch(dom); m != nil {
			return m[1]
		}
		return ""
	}
	const noSurvey = "No AutoReplay run has surveyed lag yet."
	const partial = "cut short by the run's deadline: the counts are partial"

	dom := render(lagSummary(`{"at": "2026-11-25T19:00:00Z", "window": 300, "orders": 1234, "complete": true,
		"surveyedThisPeriod": 1000, "periodStartedAt": "2026-11-25T18:58:00Z", "oldestSurveyAt": "2026-11-25T18:57:00Z",
		"periodSeconds": 180, "ordersPerRun": 500,
		"byStatus": {"ok": 10, "catching-up": 1200, "stalled": 20, "blocked": 4}, "stalledTwoWindows": 3,
		"oldestHeads": [
			{"orderId": "o-1", "status": "stalled", "backlog": 5, "appliedSeq": 12, "headAgeSeconds": 912.3},
			{"orderId": "o-<i>2</i>", "status": "blocked", "backlog": 2, "appliedSeq": 7, "headAgeSeconds": 90061},
			{"orderId": "o-3", "status": "catching-up", "backlog": 1, "appliedSeq": 40, "headAgeSeconds": 8}],
		"criticalTime": {"count": 5000, "p50Ms": 120, "p99Ms": 2300, "maxMs": 4100, "sinceSeconds": 420}}`))
	for _, want := range []string{
		"<b>10</b>ok</div>", "<b>1200</b>catching-up</div>", "<b>20</b>stalled</div>", "<b>4</b>blocked</div>",
		"<b>3</b>stalled for two windows</div>",
		"<b>120 ms</b>critical time p50</div>", "<b>2.3 s</b>critical time p99</div>", "<b>4.1 s</b>critical time max</div>",
		"of the 5000 transactions applied in the last 7 min.",
		// Times relative to the summary's (19:00:01), exact to the second on hover.
		`Surveyed <time datetime="2026-11-25T19:00:00Z" title="2026-11-25 19:00:00 UTC">just now</time>: ` +
			`1234 active orders, over a window of 5 min (300 s). 1000 surveyed this period (since <time datetime="2026-11-25T18:58:00Z" title="2026-11-25 18:58:00 UTC">2 min ago</time>), at most 500 a run; ` +
			`the oldest survey counted: <time datetime="2026-11-25T18:57:00Z" title="2026-11-25 18:57:00 UTC">3 min ago</time>; every active order is looked at every 3 min.`,
		`<tr data-order="o-1"><td>o-1</td><td class="stalled">stalled</td><td>5</td><td>12</td><td>15 min 12 s</td></tr>`,
		`<td>o-&lt;i&gt;2&lt;/i&gt;</td><td>blocked</td><td>2</td><td>7</td><td>1 d 1 h</td></tr>`,
		`<td>o-3</td><td>catching-up</td><td>1</td><td>40</td><td>8 s</td></tr>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("a complete survey: the page lacks %s", want)
		}
	}
	if strings.Contains(dom, "<td>o-<i>") || strings.Contains(dom, partial) || strings.Contains(dom, noSurvey) || strings.Contains(dom, `<table id="oldestHeads" hidden`) {
		t.Errorf("a complete survey: an order id as markup, or the survey said partial or missing, or the oldest heads hidden:\n%s", note(dom))
	}
	if o1, o2 := strings.Index(dom, `data-order="o-1"`), strings.Index(dom, `<td>o-3</td>`); o1 < 0 || o2 < o1 {
		t.Errorf("the oldest heads are not in the summary's order (oldest first)")
	}

	dom = render(lagSummary(`{"at": "2026-11-25T19:00:00Z", "window": 300, "orders": 800, "complete": false,
		"byStatus": {"ok": 790, "stalled": 10}, "stalledTwoWindows": 0, "oldestHeads": []}`))
	if n := note(dom); !strings.Contains(n, partial) || !strings.Contains(n, "800 active orders") || !strings.Contains(dom, `<p id="lagNote" class="error">`) {
		t.Errorf("a survey cut short: the note %q does not say its counts are partial", n)
	}
	for _, want := range []string{"<b>790</b>ok</div>", "<b>0</b>catching-up</div>", "<b>10</b>stalled</div>", "<b>0</b>stalled for two windows</div>",
		"No transaction was applied in the recent window: no critical time.", `<table id="oldestHeads" hidden`} {
		if !strings.Contains(dom, want) {
			t.Errorf("a survey cut short, no critical time, no head: the page lacks %s", want)
		}
	}

	// Before the first run: the dead letters not read yet is said, not in
	// red (a healthy app shows it for its first minute).
	const notRead = "not read yet: AutoReplay reads the dead-letter queue on each run, and none has run yet"
	first := `{"at": "2026-11-25T19:00:01Z", "blockedOrders": 0, "blockedComplete": true, "parkedMessages": 0,
		"deadLettersUnreadable": "` + notRead + `", "autoReplay": {"enabled": true, "replayed": 0, "pending": 0, "retrying": 0, "unreached": 0, "deferred": 0, "breakerOpen": false}}`
	dom = render(first)
	if !strings.Contains(dom, `<div id="status" class="">`+notRead+`</div>`) {
		t.Errorf("before the first run: the status line is not the plain %q:\n%s", notRead, statusLine.FindString(dom))
	}
	dom = render(strings.Replace(first, `"deadLettersUnreadable"`, `"figuresAt": "2026-11-25T19:00:00Z", "deadLettersUnreadable"`, 1))
	if !strings.Contains(dom, `<div id="status" class="error">`) {
		t.Errorf("a run that could not read the dead letters: the status line is not an error: %s", statusLine.FindString(dom))
	}

	for _, sum := range []string{lagSummary("null"), strings.Replace(lagSummary("null"), `,
		"lag": null`, "", 1)} {
		dom = render(sum)
		if n := note(dom); n != noSurvey || strings.Contains(dom, "stalled for two windows") || !strings.Contains(dom, `<table id="oldestHeads" hidden`) {
			t.Errorf("no survey yet (%s): the note says %q, want %q, and no figures or heads", tail(sum, 20), n, noSurvey)
		}
	}
}

// TestDashboardOrderPageEscapes: an order's page shows what the JSON
// routes answer as text, never as markup (reasons and data are other
// tools' and users' words): a dead-letter reason, a rejection's reason, a
// transaction's id and a parked message's id holding <script> are shown
// escaped and run nothing; its history pages on with the continuation the
// answer gave (a link, #order=<id>&history=<token>&from=<n>), and the
// transactions of a later page are numbered by their place in the order's
// history, after those of the pages before it.
func TestDashboardOrderPageEscapes(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	const evil = `<script>document.body.dataset.pwned="yes"</script>`
	page := handler.New(handler.Deps{Domains: []handler.Domain{{Rules: orders.Domain}}})
	var asked atomic.Value
	asked.Store("")
	mux := http.NewServeMux()
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}
	}
	parked := answer(`{"orderId": "o-x", "parked": 2, "missingSeq": 5, "windowSize": 16, "messages": [
		{"seq": 6, "messageId": ` + strconv.Quote(evil) + `, "enqueuedAt": "2026-11-25T18:50:01Z", "traceId": "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"seq": 8, "messageId": "L:7"}]}`)
	mux.HandleFunc("/api/dashboard", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("parked") == "o-x" {
			parked(w, r)
			return
		}
		page.ServeHTTP(w, r)
	})
	mux.HandleFunc("/api/summary", answer(lagSummary("null")))
	mux.HandleFunc("/api/orders", answer(`{"orders": [{"orderId": "o-x", "appliedSeq": 4, "parked": 2, "missingSeq": 5, "blockedSince": "2026-11-25T18:50:01Z",
		"missing": {"where": "deadLetter", "messageId": "L:4", "deadLetterReason": `+strconv.Quote(evil)+`, "cause": "permanent", "why": "unreadable"}}]}`))
	mux.HandleFunc("/api/orders/o-x", func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.URL.RawQuery)
		answer(`{"orderId": "o-x", "status": "open", "complete": false, "currency": "EUR", "appliedSeq": 4, "parked": 2, "missingSeq": 5,
			"blockedSince": "2026-11-25T18:50:01Z", "transactions": [{"txId": `+strconv.Quote(evil)+`, "amount": 5}], "total": 5,
			"rejected": [{"seq": 3, "op": "AddTransaction", "txId": "t-3", "reason": `+strconv.Quote(evil)+`}], "updatedAt": "2026-11-25T18:50:01Z",
			"continuation": "aDEuMS4tMQ", "lag": {"backlog": 3, "status": "blocked", "window": 300}}`)(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	render := func(hash string) string {
		t.Helper()
		dom := pageScript.ReplaceAllString(string(headless(t, ctx, srv.URL+"/api/dashboard"+hash, "--dump-dom")), "")
		if !strings.Contains(dom, `data-ready="true"`) || strings.Contains(dom, "data-pwned") || strings.Contains(dom, "<script>document") {
			t.Fatalf("the order page (%s) did not load, or ran or holds the reason as markup:\n%s", hash, tail(dom, 3000))
		}
		return dom
	}
	dom := render("#order=o-x")
	esc := `&lt;script&gt;document.body.dataset.pwned="yes"&lt;/script&gt;`
	for _, want := range []string{"dead-lettered for " + esc + ": a permanent cause (unreadable).", "<td>1</td><td>" + esc + "</td><td>5</td>",
		"<td>3</td><td>AddTransaction</td><td>t-3</td><td>" + esc + "</td>", "transactions 1 to 1 of the order's; more follow.",
		`<a id="historyNext" href="#order=o-x&amp;history=aDEuMS4tMQ&amp;from=1">next page</a>`,
		"2 message(s) parked behind seq 5, from seq 6 on, waiting for it.",
		`<tr data-seq="6"><td>6</td><td class="mono">` + esc + `</td><td><time datetime="2026-11-25T18:50:01Z" title="2026-11-25 18:50:01 UTC">10 min ago</time></td><td class="mono">4bf92f3577b34da6a3ce929d0e0e4736</td></tr>`,
		`<tr data-seq="8"><td>8</td><td class="mono">L:7</td><td>unknown</td><td>none carried</td></tr>`,
		"The trace ids of the messages it applied or rejected are on the processor's outcome lines"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the order page lacks %s", want)
		}
	}
	if q := asked.Load().(string); q != "pageSize=20" {
		t.Errorf("the page asked OrderStatus for ?%s, want pageSize=20", q)
	}
	// The next page, as its link names it: its transaction is the second.
	dom = render("#order=o-x&history=aDEuMS4tMQ&from=1")
	for _, want := range []string{"<td>2</td><td>" + esc + "</td><td>5</td>", "A later page of its history, 20 of each at most; transactions 2 to 2 of the order's; more follow.",
		`<a id="historyNext" href="#order=o-x&amp;history=aDEuMS4tMQ&amp;from=2">next page</a>`, `<a id="historyFirst" href="#order=o-x">first page</a>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the order's next page lacks %s", want)
		}
	}
	if q := asked.Load().(string); q != "continuation=aDEuMS4tMQ&pageSize=20" && q != "pageSize=20&continuation=aDEuMS4tMQ" {
		t.Errorf("the next page asked OrderStatus for ?%s, want pageSize=20 and the continuation", q)
	}
}

// TestDashboardShowsAccounts: opened with ?domain=accounts, the page is the
// account domain's, rendered by headless Chromium from canned answers (the
// page itself is the handler's, serving orders then accounts): its selector
// links to both domains, the accounts one marked; its figures, its blocked
// list and an account's page are read from the account routes (the blocked
// list's "accounts", each "accountId") and say accounts, and no order route
// is asked; the account's page shows its balance and limit, its entries as
// the answer gave them, numbered, and its replay and skip on the account
// routes (the buttons' routes, as the page's data names them).
func TestDashboardShowsAccounts(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	page := handler.New(handler.Deps{Domains: []handler.Domain{{Rules: orders.Domain}, {Rules: accounts.Domain}}})
	var mu sync.Mutex
	var asked []string
	mux := http.NewServeMux()
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}
	}
	parked := answer(`{"accountId": "acc-1", "parked": 2, "missingSeq": 3, "windowSize": 16, "messages": [{"seq": 4, "messageId": "A:3"}, {"seq": 5, "messageId": "A:4"}]}`)
	mux.HandleFunc("/api/dashboard", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("parked") {
			parked(w, r)
			return
		}
		page.ServeHTTP(w, r)
	})
	mux.HandleFunc("/api/summary", answer(strings.Replace(lagSummary("null"), `"blockedOrders": 4`, `"domain": "accounts", "blockedOrders": 1`, 1)))
	mux.HandleFunc("/api/orders", answer(`{"orders": [{"orderId": "o-wrong", "appliedSeq": 1, "parked": 1, "missingSeq": 2, "blockedSince": "2026-11-25T18:50:01Z"}]}`))
	mux.HandleFunc("/api/accounts", answer(`{"accounts": [{"accountId": "acc-1", "appliedSeq": 2, "parked": 2, "missingSeq": 3, "blockedSince": "2026-11-25T18:50:01Z",
		"missing": {"where": "deadLetter", "messageId": "A:2", "deadLetterReason": "MaxDeliveryCountExceeded", "cause": "transient", "why": "its deliveries ran out"}}]}`))
	mux.HandleFunc("/api/accounts/acc-1", answer(`{"accountId": "acc-1", "status": "open", "currency": "EUR", "limit": 5000, "balance": 90000,
		"appliedSeq": 2, "parked": 2, "missingSeq": 3, "blockedSince": "2026-11-25T18:50:01Z",
		"entries": [{"reference": "dep-1", "kind": "deposit", "amount": 120000, "balance": 120000}, {"reference": "wd-1", "kind": "withdraw", "amount": -30000, "balance": 90000}],
		"rejected": [{"seq": 1, "reason": "skipped by operator"}], "updatedAt": "2026-11-25T18:50:01Z", "lag": {"backlog": 3, "status": "blocked", "window": 300}}`))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	render := func(hash string) string {
		t.Helper()
		dom := pageScript.ReplaceAllString(string(headless(t, ctx, srv.URL+"/api/dashboard?domain=accounts"+hash, "--dump-dom")), "")
		if st := statusLine.FindStringSubmatch(dom); !strings.Contains(dom, `data-ready="true"`) || st == nil || strings.HasPrefix(st[1], "Could not load") {
			t.Fatalf("the accounts page (%s) did not load its data (status %q):\n%s", hash, st, tail(dom, 3000))
		}
		return dom
	}
	dom := render("")
	for _, want := range []string{
		`<h1 id="title">convoy: accounts at a glance</h1>`,
		`<a href="?domain=orders">orders</a> | <a href="?domain=accounts" aria-current="page">accounts</a>`,
		`<th class="noun">account</th>`,
		"<b>1</b>blocked accounts</div>",
		`<tr class="blocked" data-order="acc-1"><td><a href="#account=acc-1">acc-1</a></td><td>3</td><td>2</td>`,
		`<button>replay</button> <button>skip seq 3</button>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the accounts list lacks %s", want)
		}
	}
	if strings.Contains(dom, "o-wrong") {
		t.Errorf("the accounts list shows an order")
	}
	dom = render("#account=acc-1")
	for _, want := range []string{
		`<h2><span id="orderNoun">Account</span> <span id="orderTitle" class="mono">acc-1</span></h2>`,
		`<th scope="row">status</th><td>open</td>`, `<th scope="row">limit</th><td>5000</td>`, `<th scope="row">balance</th><td>90000</td>`,
		`<th scope="row">applied seq</th><td>2</td>`, `<th scope="row">missing seq</th><td>3</td>`,
		"That message is in the accounts queue's dead-letter sub-queue, message A:2, dead-lettered for MaxDeliveryCountExceeded: a transient cause",
		`<caption>Entries</caption>`,
		`<tr><td>1</td><td>dep-1</td><td>deposit</td><td>120000</td><td>120000</td></tr>`,
		`<tr><td>2</td><td>wd-1</td><td>withdraw</td><td>-30000</td><td>90000</td></tr>`,
		`<tr><td>1</td><td>skipped by operator</td></tr>`,
		"entries 1 to 2 of the account's; nothing follows.",
		`<p id="orderActions"><button type="button">replay</button> <button type="button">skip seq 3</button></p>`,
		"2 message(s) parked behind seq 3, from seq 4 on, waiting for it.",
		`("account message", field traceId)`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the account's page lacks %s", want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	seen := strings.Join(asked, " ")
	for _, want := range []string{"/api/summary?domain=accounts", "/api/accounts?blocked=true&pageSize=500", "/api/accounts/acc-1?pageSize=20", "/api/dashboard?domain=accounts&parked=acc-1"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the page did not ask %s (it asked %s)", want, seen)
		}
	}
	if strings.Contains(seen, "/api/orders") {
		t.Errorf("the accounts page asked an order route: %s", seen)
	}
}
