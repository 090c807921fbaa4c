package devhost_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// Faults at the protocol level (devbus.Bus.SetFault, DropConnections):
// the real handler, with the real azservicebus client, against a namespace
// that refuses connections, stalls, drops them, or answers "server busy" and
// "timeout". Each ends with an honest answer and, where messages moved,
// nothing lost or applied twice (the independent fold, checkFold).

var busFaults = []struct {
	name  string
	fault devbus.Fault
}{
	{"refused", devbus.Fault{Refuse: true}},
	{"stalled", devbus.Fault{Stall: true}},
	{"server busy", devbus.Fault{Condition: devbus.CondServerBusy}},
	{"timeout", devbus.Fault{Condition: devbus.CondTimeout}},
}

func faultSettings(o *devhost.Options) {
	o.Settings["AutoReplayEnabled"] = "false" // the operator's tools alone
	p := o.Queues["orders"]
	p.MaxDeliveryCount = 3
	o.Queues["orders"] = p
}

// timedGet GETs path and returns the status, the body and how long it took.
func (e *env) timedGet(t *testing.T, path string) (int, []byte, time.Duration) {
	t.Helper()
	t0 := time.Now()
	resp, err := http.Get(e.host.URL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, time.Since(t0)
}

func (e *env) setFault(t *testing.T, f devbus.Fault) {
	t.Helper()
	if err := e.host.Bus().SetFault(f); err != nil {
		t.Fatal(err)
	}
}

// pageBound bounds an answer that reads storage only: a blocked list or a
// summary that waited for Service Bus would take its peek deadline (3 s).
const pageBound = 2500 * time.Millisecond

// TestOperatorToolsUnderBusFaults (issue 25): the blocked list and the
// summary read storage only, so under each Service Bus fault they answer at
// once with what AutoReplay last learnt. A run during the fault, on the
// timer's own instance (Flex runs it apart from the HTTP functions), opens
// the breaker; the summary and the dashboard, on the HTTP instance, show it
// paused and why, and each missing message's whereabouts say since when
// they could not be checked. Once the fault clears, the next run closes it.
func TestOperatorToolsUnderBusFaults(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 3*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, faultSettings)
	e.poison(t, "poisoned")
	e.waitIdle(ctx)
	if len(e.host.Queue("orders").DeadLetters()) != 1 {
		t.Fatal("the poisoned message was not dead-lettered")
	}
	where := func(body []byte) (string, string) {
		var page struct {
			Orders []struct {
				OrderID string `json:"orderId"`
				Missing struct{ Where, Why string }
			} `json:"orders"`
		}
		if err := json.Unmarshal(body, &page); err != nil || len(page.Orders) != 1 || page.Orders[0].OrderID != "poisoned" {
			t.Fatalf("blocked list %s: %v, want the poisoned order", body, err)
		}
		return page.Orders[0].Missing.Where, page.Orders[0].Missing.Why
	}
	if _, body, _ := e.timedGet(t, "/api/orders?blocked=true"); !strings.Contains(string(body), "not looked for yet") {
		t.Fatalf("before any run: %s, want the missing message not looked for yet", body)
	}
	if err := e.host.FireTimer(ctx, "AutoReplay", 0); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := e.timedGet(t, "/api/orders?blocked=true"); code != 200 {
		t.Fatalf("blocked list: %d %s", code, body)
	} else if w, _ := where(body); w != "deadLetter" {
		t.Fatalf("after a run: where %q, want deadLetter", w)
	}
	timer, web := e.host.Group("function:AutoReplay"), e.host.Group("http")
	if len(timer) == 0 || len(web) == 0 || timer[0].HandlerPID() == web[0].HandlerPID() {
		t.Fatalf("AutoReplay's instances %v and the HTTP ones %v: want different handler processes", timer, web)
	}
	for _, f := range busFaults {
		e.setFault(t, f.fault)
		for _, path := range []string{"/api/orders?blocked=true", "/api/summary"} {
			code, body, took := e.timedGet(t, path)
			t.Logf("%s with Service Bus %s: %d in %s", path, f.name, code, took.Round(time.Millisecond))
			if code != 200 || took > pageBound || !strings.Contains(string(body), "poisoned") && !strings.Contains(string(body), `"blockedOrders":1`) {
				t.Errorf("%s with Service Bus %s: %d in %s: %s", path, f.name, code, took, body)
			}
		}
		// A run during the fault: paused, the breaker open for everyone.
		if err := e.host.FireTimer(ctx, "AutoReplay", 0); err != nil {
			t.Fatal(err)
		}
		_, body, _ := e.timedGet(t, "/api/summary")
		var sum struct {
			DeadLettersUnreadable string
			AutoReplay            struct {
				BreakerOpen bool
				BreakerWhy  string
			}
		}
		if err := json.Unmarshal(body, &sum); err != nil || !sum.AutoReplay.BreakerOpen || !strings.Contains(sum.AutoReplay.BreakerWhy, "Service Bus is failing") ||
			!strings.Contains(sum.DeadLettersUnreadable, "could not be read") {
			t.Errorf("summary after a run with Service Bus %s: %s, want the breaker open and the dead letters unreadable", f.name, body)
		}
		_, body, _ = e.timedGet(t, "/api/orders?blocked=true")
		if w, why := where(body); w != "deadLetter" || !strings.Contains(why, "could not be read") {
			t.Errorf("blocked list after a run with Service Bus %s: where %q why %q, want deadLetter as learnt, and since when it could not be checked", f.name, w, why)
		}
		if f.name == "stalled" {
			dom := string(headless(t, ctx, e.host.URL()+"/api/dashboard", "--dump-dom"))
			if !strings.Contains(dom, "auto-replay paused until") || !strings.Contains(dom, "Service Bus is failing") {
				t.Errorf("the dashboard does not show the breaker AutoReplay opened:\n%s", dom)
			}
		}
		e.setFault(t, devbus.Fault{})
	}
	// Healed: the next run finds the dead letter again and closes the
	// breaker (the client reconnects).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_ = e.host.FireTimer(ctx, "AutoReplay", 0)
		_, body, _ := e.timedGet(t, "/api/summary")
		if strings.Contains(string(body), `"breakerOpen":false`) && strings.Contains(string(body), `"missingBy":{"deadLetter/permanent":1}`) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after the faults cleared: %s", body)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestUploadUnderServerBusy: a ledger upload while Service Bus answers
// "server busy" fails clearly (503, the ledger named) and sends nothing that
// is applied twice; the same upload after it clears resumes from the
// checkpoint with the same seqs, and every order matches its fold.
func TestUploadUnderServerBusy(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, faultSettings)
	doc := workload(7, "busy", 1, 40, 4)[0]
	l, err := ledger.Parse(doc, ledger.Limits{}, ledgertest.Orders)
	if err != nil {
		t.Fatal(err)
	}
	upload := func() (int, string, time.Duration) {
		t0 := time.Now()
		resp, err := http.Post(e.host.URL()+"/api/ledgers", "application/json", strings.NewReader(string(doc)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), time.Since(t0)
	}
	e.setFault(t, devbus.Fault{Condition: devbus.CondServerBusy})
	code, body, took := upload()
	t.Logf("upload with Service Bus busy: %d in %s: %s", code, took.Round(time.Millisecond), body)
	if code != 503 || !strings.Contains(body, l.ID) {
		t.Fatalf("upload with Service Bus busy: %d %s, want 503 naming the ledger", code, body)
	}
	e.setFault(t, devbus.Fault{})
	if code, body, _ = upload(); code/100 != 2 {
		t.Fatalf("upload after the fault: %d %s", code, body)
	}
	e.waitIdle(ctx)
	e.checkFold(ctx, []*ledger.Ledger{l})
}

// TestPublishThroughDroppedConnections: queued ledgers are published while
// the namespace drops every connection again and again; the SDK reconnects,
// the publisher resumes, and every order matches its fold.
//
// The drops pause while the test itself sends a ledger: what is under test
// is the handler's publisher, not the test's producer, which on a loaded
// machine could not reconnect within the 150 ms between two drops.
func TestPublishThroughDroppedConnections(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 3*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, faultSettings)
	docs := workload(11, "drop", 6, 60, 8)
	stop := make(chan struct{})
	dropped := make(chan int)
	var sending sync.Mutex // held by the test's own send: no drop meanwhile
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				dropped <- n
				return
			case <-time.After(150 * time.Millisecond):
				sending.Lock()
				n += e.host.Bus().DropConnections()
				sending.Unlock()
			}
		}
	}()
	var ledgers []*ledger.Ledger
	for _, doc := range docs {
		l, err := ledger.Parse(doc, ledger.Limits{}, ledgertest.Orders)
		if err != nil {
			t.Fatal(err)
		}
		ledgers = append(ledgers, l)
		// The test's own client is dropped too, between its sends: it
		// reconnects, and retries as any producer would.
		for try := 0; ; try++ {
			sendCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			sending.Lock()
			err := e.trySendLedger(sendCtx, l, doc)
			sending.Unlock()
			cancel()
			if err == nil {
				break
			} else if try == 20 {
				t.Fatalf("send ledger %s: %v", l.ID, err)
			}
		}
	}
	time.Sleep(2 * time.Second)
	close(stop)
	t.Logf("%d connections dropped while publishing", <-dropped)
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
}

// trySendLedger sends a ledger to the ledgers queue as `convoy publish` does,
// returning the error instead of failing the test.
func (e *env) trySendLedger(ctx context.Context, l *ledger.Ledger, doc []byte) error {
	sender, err := servicebus.NewSender(e.client(), "ledgers")
	if err != nil {
		return err
	}
	defer sender.Close(ctx)
	return sender.SendLedger(ctx, l.ID, l.Stream, doc)
}
