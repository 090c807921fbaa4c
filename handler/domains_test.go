package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// domainHealer is one domain's healer: a fixed summary and run, each key
// it explains missing its seq in the dead-letter queue.
type domainHealer struct {
	blocked int
	run     heal.Run
	hang    bool // each run waits for its deadline
	mu      sync.Mutex
	ran     []time.Time // the deadline of each run
	started []time.Time // when each run began
}

func (h *domainHealer) Explain(_ context.Context, keys []convoy.BlockedOrder) ([]heal.BlockedWithCause, error) {
	out := make([]heal.BlockedWithCause, len(keys))
	for i, k := range keys {
		out[i] = heal.BlockedWithCause{BlockedOrder: k, Missing: heal.Missing{Where: heal.WhereDeadLetter, MessageID: "M:" + k.OrderID, Cause: "transient"}}
	}
	return out, nil
}

func (h *domainHealer) Summarize(context.Context) (heal.Summary, error) {
	return heal.Summary{BlockedOrders: h.blocked}, nil
}

func (h *domainHealer) RunOnce(ctx context.Context) heal.Run {
	deadline, _ := ctx.Deadline()
	h.mu.Lock()
	h.ran = append(h.ran, deadline)
	h.started = append(h.started, time.Now())
	h.mu.Unlock()
	if h.hang { // a run whose storage hangs: it returns at its deadline
		<-ctx.Done()
	}
	return h.run
}

// domainReplayer records what it was asked to replay, by key.
type domainReplayer struct {
	mu       sync.Mutex
	replayed []string
	all      int
}

func (r *domainReplayer) Replay(_ context.Context, id string) (replay.Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.replayed = append(r.replayed, id)
	return replay.Report{OrderID: id, Replayed: []replay.Replayed{{Seq: 1, MessageID: "M:" + id, NewMessageID: "M:" + id + "#replay-1"}}, Scanned: 1}, nil
}

func (r *domainReplayer) ReplayAll(context.Context, int, string) (replay.Progress, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all++
	return replay.Progress{Done: true}, nil
}

// twoDomains is the server of orders then accounts, each on a store, a
// replayer and a healer of its own.
type twoDomains struct {
	*fixture
	orders, accounts     *memstore.Store
	orderRep, accountRep *domainReplayer
	orderHeal, accHeal   *domainHealer
}

func newTwoDomains(t *testing.T, d handler.Deps) *twoDomains {
	f := &twoDomains{orders: memstore.New(), accounts: memstore.New(), orderRep: &domainReplayer{}, accountRep: &domainReplayer{},
		orderHeal: &domainHealer{blocked: 2}, accHeal: &domainHealer{blocked: 7}}
	d.Domains = []handler.Domain{
		{Rules: orders.Domain, Processor: convoy.NewProcessor(f.orders, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.orders}),
			Keys: f.orders, Blocked: f.orders, Replay: f.orderRep, Heal: f.orderHeal},
		{Rules: accounts.Domain, Processor: convoy.NewProcessor(f.accounts, convoy.ProcessorOptions{Domain: accounts.Domain, Index: f.accounts}),
			Keys: f.accounts, Blocked: f.accounts, Replay: f.accountRep, Heal: f.accHeal},
	}
	f.fixture = &fixture{srv: handler.New(d)}
	return f
}

// accountInvocation is an AccountProcessor invocation of one message of
// account id, as the host sends it: the command in {"command": …}.
func accountInvocation(id string, seq int64, command string) []byte {
	body := `{"command":` + command + `}`
	return []byte(fmt.Sprintf(`{"Data":{"message":%q},"Metadata":{"MessageId":"\"A:%s-%d\"","SessionId":"\"%s\"","DeliveryCount":"1",`+
		`"EnqueuedTimeUtc":"2026-11-29T04:18:00","ApplicationProperties":{"seq":%d},"sys":{"MethodName":"AccountProcessor"}}}`,
		body, id, seq, id, seq))
}

// TestAccountProcessorAppliesAccountCommands: AccountProcessor reads its
// messages as account commands and applies them to the account's own
// store: an account opened with a limit, a deposit and a withdrawal leave
// the balance the commands add up to (120,000 − 30,000), and the status
// route shows it with the entries as sent; its outcome lines say "account
// message" and name the account (accountId). An order message sent to it
// is unreadable (the invocation fails) and changes nothing; the order
// domain's store never sees the account.
func TestAccountProcessorAppliesAccountCommands(t *testing.T) {
	f := newTwoDomains(t, handler.Deps{})
	for seq, cmd := range []string{
		`{"accountId":"acc-1","kind":"open","currency":"EUR","limit":5000}`,
		`{"accountId":"acc-1","kind":"deposit","amount":120000,"reference":"dep-1"}`,
		`{"accountId":"acc-1","kind":"withdraw","amount":30000,"reference":"wd-1"}`,
	} {
		code, out := f.do(t, "POST", "/AccountProcessor", accountInvocation("acc-1", int64(seq+1), cmd))
		logs, _ := out["Logs"].([]any)
		if code != 200 || len(logs) != 1 || !strings.HasPrefix(logs[0].(string), "account message sessionId=acc-1 seq="+fmt.Sprint(seq+1)) ||
			!strings.Contains(logs[0].(string), " outcome=applied") || !strings.Contains(logs[0].(string), " accountId=acc-1 traceId=") {
			t.Fatalf("seq %d: %d %v", seq+1, code, out)
		}
	}
	o, err := f.accounts.Load(context.Background(), "acc-1")
	if err != nil || o.AppliedSeq != 3 {
		t.Fatalf("the account's head: %+v %v", o, err)
	}
	code, view := f.do(t, "GET", "/api/accounts/acc-1", nil)
	type entry struct {
		Reference, Kind string
		Amount, Balance int64
	}
	var got struct {
		AccountID, Status, Currency string
		Limit, Balance, AppliedSeq  int64
		Entries                     []entry
		Lag                         map[string]any
	}
	raw, _ := json.Marshal(view)
	_ = json.Unmarshal(raw, &got)
	want := []entry{{"dep-1", "deposit", 120000, 120000}, {"wd-1", "withdraw", -30000, 90000}}
	if code != 200 || got.AccountID != "acc-1" || got.Status != "open" || got.Currency != "EUR" || got.Limit != 5000 ||
		got.Balance != 120000-30000 || got.AppliedSeq != 3 || !reflect.DeepEqual(got.Entries, want) || got.Lag == nil {
		t.Fatalf("AccountStatus: %d %s", code, raw)
	}
	if _, has := view["orderId"]; has {
		t.Errorf("an account's answer names an orderId: %s", raw)
	}
	code, out := f.do(t, "POST", "/AccountProcessor", accountInvocation("acc-1", 4, `{"orderId":"acc-1","op":"DeleteOrder"}`))
	if code < 300 || out["Error"] == nil {
		t.Fatalf("an order's transaction to AccountProcessor: %d %v, want a failed invocation", code, out)
	}
	if o, _ := f.accounts.Load(context.Background(), "acc-1"); o.AppliedSeq != 3 || len(o.Parked) != 0 {
		t.Fatalf("an unreadable message changed the account: %+v", o)
	}
	if o, _ := f.orders.Load(context.Background(), "acc-1"); o.Version != 0 {
		t.Fatalf("the order store has the account: %+v", o)
	}
	for path, want := range map[string]int{"/api/accounts/acc-404": 404, "/api/accounts/bad%20id": 400, "/api/orders/acc-1": 404} {
		if code, out := f.do(t, "GET", path, nil); code != want || out["error"] == nil {
			t.Errorf("GET %s = %d %v, want %d with an error", path, code, out, want)
		}
	}
	if _, out := f.do(t, "GET", "/api/accounts/acc-404", nil); out["error"] != `account "acc-404" has no state` {
		t.Errorf("an unknown account: %v", out)
	}
	if _, out := f.do(t, "GET", "/api/accounts/bad%20id", nil); !strings.HasPrefix(fmt.Sprint(out["error"]), "accountId ") {
		t.Errorf("an invalid account id: %v", out)
	}
}

// TestAccountOperations: an account blocked behind its missing seq 1 is
// listed under "accounts" (each with its accountId and where its missing
// message is), not among the orders; its parked window is the account's;
// its replay asks the account domain's replayer, and answers with its
// accountId; its skip records the seq in the account's store, drains seq 2
// (a deposit on an account never opened: rejected) and answers with the
// account's view under "account".
func TestAccountOperations(t *testing.T) {
	f := newTwoDomains(t, handler.Deps{})
	if code, out := f.do(t, "POST", "/AccountProcessor", accountInvocation("acc-2", 2, `{"accountId":"acc-2","kind":"deposit","amount":5,"reference":"d-1"}`)); code != 200 {
		t.Fatalf("seq 2: %d %v", code, out)
	}
	code, out := f.do(t, "GET", "/api/accounts?blocked=true", nil)
	listed, _ := out["accounts"].([]any)
	if code != 200 || len(listed) != 1 || len(out) != 1 {
		t.Fatalf("blocked accounts: %d %v", code, out)
	}
	row := listed[0].(map[string]any)
	if row["accountId"] != "acc-2" || row["missingSeq"] != 1.0 || row["parked"] != 1.0 || row["orderId"] != nil ||
		row["missing"].(map[string]any)["messageId"] != "M:acc-2" {
		t.Fatalf("blocked account row %v", row)
	}
	if code, out := f.do(t, "GET", "/api/orders?blocked=true", nil); code != 200 || len(out["orders"].([]any)) != 0 {
		t.Fatalf("blocked orders: %d %v, want none", code, out)
	}
	if code, out := f.do(t, "GET", "/api/accounts", nil); code != 400 || !strings.Contains(fmt.Sprint(out["error"]), "only blocked accounts") {
		t.Errorf("the accounts without ?blocked=true: %d %v", code, out)
	}
	code, out = f.do(t, "GET", "/api/dashboard?domain=accounts&parked=acc-2", nil)
	if code != 200 || out["accountId"] != "acc-2" || out["missingSeq"] != 1.0 || len(out["messages"].([]any)) != 1 {
		t.Fatalf("the account's parked window: %d %v", code, out)
	}
	if code, _ := f.do(t, "GET", "/api/dashboard?parked=acc-2", nil); code != 404 {
		t.Errorf("the parked window of acc-2 as an order: %d, want 404", code)
	}

	code, out = f.do(t, "POST", "/api/accounts/acc-2/replay", nil)
	if code != 200 || out["accountId"] != "acc-2" || out["orderId"] != nil || fmt.Sprint(f.accountRep.replayed) != "[acc-2]" || len(f.orderRep.replayed) != 0 {
		t.Fatalf("replay: %d %v; account replays %v, order replays %v", code, out, f.accountRep.replayed, f.orderRep.replayed)
	}
	env := []byte(`{"Data":{"req":{"Method":"POST","Params":{"accountId":"acc-2"}}},"Metadata":{}}`)
	code, out = f.do(t, "POST", "/ReplayAccount", env)
	res, _ := out["Outputs"].(map[string]any)["res"].(map[string]any)
	if code != 200 || res["statusCode"] != 200.0 || !strings.Contains(fmt.Sprint(res["body"]), `"accountId":"acc-2"`) || len(f.accountRep.replayed) != 2 {
		t.Fatalf("replay through the envelope: %d %v", code, out)
	}

	code, out = f.do(t, "POST", "/api/accounts/acc-2/skip?seq=1", nil)
	if code != 200 || out["accountId"] != "acc-2" || out["skipped"] != 1.0 || fmt.Sprint(out["drained"]) != "[2]" || out["order"] != nil {
		t.Fatalf("skip: %d %v", code, out)
	}
	view, _ := out["account"].(map[string]any)
	rejected, _ := view["rejected"].([]any)
	if view["accountId"] != "acc-2" || view["appliedSeq"] != 2.0 || view["status"] != "new" || len(rejected) != 2 ||
		rejected[0].(map[string]any)["reason"] != "skipped by operator" || rejected[1].(map[string]any)["kind"] != "deposit" {
		t.Fatalf("the account after the skip: %v", view)
	}
	if o, _ := f.accounts.Load(context.Background(), "acc-2"); o.AppliedSeq != 2 || len(o.Parked) != 0 {
		t.Fatalf("the account's head after the skip: %+v", o)
	}
	env = []byte(`{"Data":{"req":{"Method":"POST","Query":{"seq":"2"},"Params":{"accountId":"acc-2"}}},"Metadata":{}}`)
	_, out = f.do(t, "POST", "/SkipAccountGap", env)
	if res, _ := out["Outputs"].(map[string]any)["res"].(map[string]any); res["statusCode"] != 409.0 {
		t.Fatalf("a skip of a received seq through the envelope: %v, want 409", out)
	}
	if code, out := f.do(t, "POST", "/api/accounts/acc-3/skip?seq=1", nil); code != 404 || out["error"] != `account "acc-3" has no state` {
		t.Errorf("a skip of an unknown account: %d %v", code, out)
	}
}

// TestDomainSelection: the summary, the dashboard, the parked window and
// the replay of every dead letter answer for the domain ?domain= names,
// the first (orders) without one; a name no domain has is a 400 that lists
// the domains served. The summary names its domain.
func TestDomainSelection(t *testing.T) {
	f := newTwoDomains(t, handler.Deps{})
	for path, want := range map[string]float64{"/api/summary": 2, "/api/summary?domain=orders": 2, "/api/summary?domain=accounts&code=k": 7} {
		code, out := f.do(t, "GET", path, nil)
		domain := "orders"
		if want == 7 {
			domain = "accounts"
		}
		if code != 200 || out["blockedOrders"] != want || out["domain"] != domain {
			t.Errorf("GET %s: %d %v, want the %s summary", path, code, out, domain)
		}
	}
	for _, path := range []string{"/api/summary?domain=nope", "/api/dashboard?domain=nope", "/api/dashboard?domain=Accounts&parked=acc-1",
		"/api/summary?domain=orders&domain=accounts"} {
		code, out := f.do(t, "GET", path, nil)
		if code != 400 || !strings.Contains(fmt.Sprint(out["error"]), "domain") {
			t.Errorf("GET %s: %d %v, want 400", path, code, out)
		}
	}
	if _, out := f.do(t, "GET", "/api/summary?domain=nope", nil); !strings.Contains(fmt.Sprint(out["error"]), "orders, accounts") {
		t.Errorf("an unknown domain does not list the known ones: %v", out)
	}
	if code, out := f.do(t, "POST", "/api/deadletters/replay?domain=nope", nil); code != 400 || f.orderRep.all+f.accountRep.all != 0 {
		t.Errorf("replay all of an unknown domain: %d %v", code, out)
	}
	if code, _ := f.do(t, "POST", "/api/deadletters/replay?domain=accounts", nil); code != 200 || f.accountRep.all != 1 || f.orderRep.all != 0 {
		t.Errorf("replay all of accounts: %d; accounts %d, orders %d", code, f.accountRep.all, f.orderRep.all)
	}
	if code, _ := f.do(t, "POST", "/api/deadletters/replay", nil); code != 200 || f.orderRep.all != 1 || f.accountRep.all != 1 {
		t.Errorf("replay all, no domain: %d; accounts %d, orders %d", code, f.accountRep.all, f.orderRep.all)
	}
	// The page's data: the domain shown, and each domain's routes.
	for path, shown := range map[string]string{"/api/dashboard": "orders", "/api/dashboard?domain=accounts&code=k": "accounts"} {
		rec := httptest.NewRecorder()
		f.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		page := rec.Body.String()
		i := strings.Index(page, `<script type="application/json" id="config">`)
		j := strings.Index(page[max(i, 0):], "</script>")
		if rec.Code != 200 || i < 0 || j < 0 {
			t.Fatalf("GET %s: %d, no config element", path, rec.Code)
		}
		var cfg struct {
			Domain  string
			Domains []map[string]string
		}
		if err := json.Unmarshal([]byte(page[i+len(`<script type="application/json" id="config">`):i+j]), &cfg); err != nil {
			t.Fatalf("GET %s: the config is not JSON: %v", path, err)
		}
		accountRoutes := map[string]string{"name": "accounts", "noun": "account", "idName": "accountId", "blocked": "accounts",
			"status": "accounts/{id}", "replay": "accounts/{id}/replay", "skip": "accounts/{id}/skip"}
		if cfg.Domain != shown || len(cfg.Domains) != 2 || cfg.Domains[0]["status"] != "orders/{id}" || !reflect.DeepEqual(cfg.Domains[1], accountRoutes) {
			t.Errorf("GET %s: config %+v, want %s shown, and the routes of both", path, cfg, shown)
		}
	}
}

// TestAutoReplayRunsEachDomain: one AutoReplay invocation runs each
// domain's healer in turn, orders first, each line of a run naming its
// domain right after the prefix and a key by the domain's id name; each
// run ends by its share of the deadline left (half of it for the first of
// two), so that the first domain cannot take the second's time.
func TestAutoReplayRunsEachDomain(t *testing.T) {
	const deadline = 2 * time.Second
	f := newTwoDomains(t, handler.Deps{Deadlines: map[string]time.Duration{handler.FnAutoReplay: deadline}})
	f.orderHeal.run = heal.Run{Replayed: []heal.Replay{{OrderID: "o-1", Seqs: []int64{2}, Attempt: 1, NextWait: "1m0s"}}, Summary: &heal.Summary{BlockedOrders: 2}}
	f.accHeal.run = heal.Run{Replayed: []heal.Replay{{OrderID: "acc-1", Seqs: []int64{3}, Attempt: 1, NextWait: "1m0s"}},
		Failed: []heal.Failure{{OrderID: "acc-9", Error: "down"}}, Summary: &heal.Summary{BlockedOrders: 7}}
	f.orderHeal.hang = true // the orders' storage hangs: it must not hold up the accounts' run
	start := time.Now()
	code, out := f.do(t, "POST", "/AutoReplay", []byte(`{"Data":{"timer":{}},"Metadata":{"sys":{"MethodName":"AutoReplay"}}}`))
	took := time.Since(start)
	var logs []string
	for _, l := range out["Logs"].([]any) {
		logs = append(logs, l.(string))
	}
	want := []string{
		`auto-replay replayed domain=orders orderId=o-1 seqs=2 attempt=1 left=0 nextWait=1m0s`,
		`metrics domain=orders blockedOrders=2 `,
		`auto-replay replayed domain=accounts accountId=acc-1 seqs=3 attempt=1 left=0 nextWait=1m0s`,
		`auto-replay failed domain=accounts accountId=acc-9 error=down`,
		`metrics domain=accounts blockedOrders=7 `,
	}
	if code != 200 || len(logs) != len(want) {
		t.Fatalf("%d Logs:\n%s", code, strings.Join(logs, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(logs[i], w) {
			t.Errorf("line %d: %q, want it to start %q", i, logs[i], w)
		}
	}
	if len(f.orderHeal.ran) != 1 || len(f.accHeal.ran) != 1 {
		t.Fatalf("runs: orders %d, accounts %d", len(f.orderHeal.ran), len(f.accHeal.ran))
	}
	// Each run has the invocation's whole deadline, and they go at once.
	for name, h := range map[string]*domainHealer{"orders": f.orderHeal, "accounts": f.accHeal} {
		if end := h.ran[0].Sub(start); end < deadline-time.Second || end > deadline+time.Second {
			t.Errorf("the %s run's deadline is %v after the start, want about %v", name, end, deadline)
		}
	}
	if began := f.accHeal.started[0].Sub(start); began > deadline/2 {
		t.Errorf("the accounts' run began %v after the start, behind the orders' hung run", began)
	}
	if took > deadline+time.Second {
		t.Errorf("the invocation took %v, more than its deadline %v", took, deadline)
	}
}

// TestDomainDeadlines: each domain's function has the deadline of the
// order function of the same role (the deadline its store or replayer
// sees, as the order domain's sees it): ReadDeadline for the status and
// the blocked list, ReplayDeadline for a replay, SkipDeadline for a skip.
func TestDomainDeadlines(t *testing.T) {
	seen := map[string]time.Duration{}
	var mu sync.Mutex
	note := func(ctx context.Context, what string) {
		deadline, ok := ctx.Deadline()
		mu.Lock()
		defer mu.Unlock()
		if ok {
			seen[what] = time.Until(deadline).Round(time.Second)
		} else {
			seen[what] = -1
		}
	}
	domain := func(rules keyed.Domain) handler.Domain {
		return handler.Domain{Rules: rules, Processor: deadlineProcessor{rules.Name(), note}, Keys: deadlineKeys{rules.Name(), note},
			Blocked: deadlineIndex{memstore.New(), rules.Name(), note}, Replay: deadlineReplayer{rules.Name(), note}}
	}
	srv := handler.New(handler.Deps{Domains: []handler.Domain{domain(orders.Domain), domain(accounts.Domain)}})
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/orders/o-1"}, {"GET", "/api/accounts/a-1"},
		{"GET", "/api/orders?blocked=true"}, {"GET", "/api/accounts?blocked=true"},
		{"POST", "/api/orders/o-1/replay"}, {"POST", "/api/accounts/a-1/replay"},
		{"POST", "/api/orders/o-1/skip?seq=1"}, {"POST", "/api/accounts/a-1/skip?seq=1"},
	} {
		srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(r.method, r.path, nil))
	}
	for role, want := range map[string]time.Duration{"load": handler.ReadDeadline, "scan": handler.ReadDeadline,
		"replay": handler.ReplayDeadline, "skip": handler.SkipDeadline} {
		if o, a := seen["orders "+role], seen["accounts "+role]; o != want || a != o {
			t.Errorf("%s: the order function's deadline %v, the account function's %v: want %v", role, o, a, want)
		}
	}
}

type deadlineProcessor struct {
	domain string
	note   func(context.Context, string)
}

func (p deadlineProcessor) Process(context.Context, string, []convoy.Message) (convoy.Result, error) {
	return convoy.Result{}, nil
}

func (p deadlineProcessor) Skip(ctx context.Context, id string, seq int64) (convoy.Result, convoy.View, error) {
	p.note(ctx, p.domain+" skip")
	return convoy.Result{}, convoy.View{}, fmt.Errorf("not skipped")
}

func (p deadlineProcessor) Resume(context.Context, string) (convoy.Result, error) {
	return convoy.Result{}, nil
}

type deadlineKeys struct {
	domain string
	note   func(context.Context, string)
}

func (k deadlineKeys) Load(ctx context.Context, id string) (*convoy.Key, error) {
	k.note(ctx, k.domain+" load")
	return &convoy.Key{ID: id}, nil
}

type deadlineIndex struct {
	*memstore.Store
	domain string
	note   func(context.Context, string)
}

func (i deadlineIndex) ScanBlocked(ctx context.Context, after string, limit int) ([]convoy.BlockedEntry, bool, error) {
	i.note(ctx, i.domain+" scan")
	return i.Store.ScanBlocked(ctx, after, limit)
}

type deadlineReplayer struct {
	domain string
	note   func(context.Context, string)
}

func (r deadlineReplayer) Replay(ctx context.Context, id string) (replay.Report, error) {
	r.note(ctx, r.domain+" replay")
	return replay.Report{OrderID: id, Replayed: []replay.Replayed{}}, nil
}

func (r deadlineReplayer) ReplayAll(context.Context, int, string) (replay.Progress, error) {
	return replay.Progress{Done: true}, nil
}

// TestFunctionsAreTheDeployedOnes: the functions and routes each domain's
// names derive (FunctionsOf) are those deployed, as functions/<Name>/
// function.json declares them: the order domain's as they always were
// (SkipGap kept its name), the account domain's by the same rule; and the
// server answers each function's envelope (POST /<Name>).
func TestFunctionsAreTheDeployedOnes(t *testing.T) {
	f := handler.FunctionsOf(orders.Domain)
	if legacy := [5]string{handler.FnOrderProcessor, handler.FnOrderStatus, handler.FnBlockedOrders, handler.FnReplayOrder, handler.FnSkipGap}; [5]string{f.Processor, f.Status, f.Blocked, f.Replay, f.Skip} != legacy {
		t.Errorf("the order domain's functions: %+v, want %v", f, legacy)
	}
	srv := newTwoDomains(t, handler.Deps{}).srv
	for _, d := range []keyed.Domain{orders.Domain, accounts.Domain} {
		f := handler.FunctionsOf(d)
		queue := strings.ToUpper(f.Name[:1]) + f.Name[1:] + "QueueName"
		for fn, want := range map[string]struct{ method, route string }{
			f.Status: {"get", f.StatusRoute}, f.Blocked: {"get", f.BlockedRoute}, f.Replay: {"post", f.ReplayRoute}, f.Skip: {"post", f.SkipRoute},
			f.Processor: {"queue", "%" + queue + "%"},
		} {
			var fj struct {
				Bindings []struct {
					Type, Route, QueueName string
					Methods                []string
				}
			}
			data, err := os.ReadFile(filepath.Join("..", "functions", fn, "function.json"))
			if err != nil || json.Unmarshal(data, &fj) != nil || len(fj.Bindings) == 0 {
				t.Errorf("%s: functions/%s/function.json: %v", d.Name(), fn, err)
				continue
			}
			b := fj.Bindings[0]
			switch {
			case want.method == "queue" && (b.Type != "serviceBusTrigger" || b.QueueName != want.route):
				t.Errorf("%s: %s is triggered by %s %s, want a Service Bus trigger on %s", d.Name(), fn, b.Type, b.QueueName, want.route)
			case want.method != "queue" && (b.Type != "httpTrigger" || b.Route != want.route || fmt.Sprint(b.Methods) != "["+want.method+"]"):
				t.Errorf("%s: %s is %s %v %s, want %s %s", d.Name(), fn, b.Type, b.Methods, b.Route, want.method, want.route)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+fn, bytes.NewReader([]byte(`{"Data":{},"Metadata":{}}`))))
			if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed {
				t.Errorf("%s: POST /%s: %d, want the function's invocation", d.Name(), fn, rec.Code)
			}
			if want.method == "queue" {
				continue
			}
			// The host forwards /api/<route>, its parameters filled in, as it is.
			path := "/api/" + strings.Replace(b.Route, "{"+f.IDName+"}", "k-1", 1)
			rec = httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(strings.ToUpper(want.method), path, nil))
			if rec.Code == http.StatusNotFound && !strings.Contains(rec.Body.String(), "has no state") || rec.Code == http.StatusMethodNotAllowed {
				t.Errorf("%s: %s %s: %d %s, want the function's answer", d.Name(), strings.ToUpper(want.method), path, rec.Code, rec.Body)
			}
		}
	}
}
