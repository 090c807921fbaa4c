package devhost_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// Faults at the protocol level (devhost.Bus.SetFault, DropConnections):
// the real handler, with the real azservicebus client, against a namespace
// that refuses connections, stalls, drops them, or answers "server busy" and
// "timeout". Each ends with an honest answer and, where messages moved,
// nothing lost or applied twice (the independent fold, checkFold).

// answerBound is how long an operator's call may take with Service Bus
// down: the target is 5 s; the bound leaves room for a loaded CI machine.
const answerBound = 10 * time.Second

var busFaults = []struct {
	name  string
	fault devhost.Fault
}{
	{"refused", devhost.Fault{Refuse: true}},
	{"stalled", devhost.Fault{Stall: true}},
	{"server busy", devhost.Fault{Condition: devhost.CondServerBusy}},
	{"timeout", devhost.Fault{Condition: devhost.CondTimeout}},
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

func (e *env) setFault(t *testing.T, f devhost.Fault) {
	t.Helper()
	if err := e.host.Bus().SetFault(f); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorToolsUnderBusFaults: the blocked list and the summary answer
// within bounds under each fault, the blocked order listed with where
// "unknown" and why; once the fault clears, its dead letter is found again.
func TestOperatorToolsUnderBusFaults(t *testing.T) {
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
	if code, body, _ := e.timedGet(t, "/api/orders?blocked=true"); code != 200 {
		t.Fatalf("blocked list: %d %s", code, body)
	} else if w, _ := where(body); w != "deadLetter" {
		t.Fatalf("before the fault: where %q, want deadLetter", w)
	}
	for _, f := range busFaults {
		e.setFault(t, f.fault)
		code, body, took := e.timedGet(t, "/api/orders?blocked=true")
		w, why := where(body)
		t.Logf("blocked list with Service Bus %s: %d in %s, where %q: %s", f.name, code, took.Round(time.Millisecond), w, why)
		if code != 200 || w != "unknown" || why == "" || took > answerBound {
			t.Errorf("blocked list with Service Bus %s: %d in %s, where %q why %q", f.name, code, took, w, why)
		}
		code, body, took = e.timedGet(t, "/api/summary")
		t.Logf("summary with Service Bus %s: %d in %s", f.name, code, took.Round(time.Millisecond))
		if code != 200 || took > answerBound || !strings.Contains(string(body), `"blockedOrders":1`) || !strings.Contains(string(body), `"missingBy":{"unknown":1}`) {
			t.Errorf("summary with Service Bus %s: %d in %s: %s", f.name, code, took, body)
		}
		e.setFault(t, devhost.Fault{})
	}
	// Healed: the answer is the truth again (the client reconnects).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body, _ := e.timedGet(t, "/api/orders?blocked=true")
		if w, _ := where(body); w == "deadLetter" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after the faults cleared: where %q", w)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestUploadUnderServerBusy: a ledger upload while Service Bus answers
// "server busy" fails clearly (503, the ledger named) and sends nothing that
// is applied twice; the same upload after it clears resumes from the
// checkpoint with the same seqs, and every order matches its fold.
func TestUploadUnderServerBusy(t *testing.T) {
	ctx := timeout(t, 2*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, faultSettings)
	doc := workload(7, "busy", 1, 40, 4)[0]
	l, err := ledger.Parse(doc, ledger.Limits{})
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
	e.setFault(t, devhost.Fault{Condition: devhost.CondServerBusy})
	code, body, took := upload()
	t.Logf("upload with Service Bus busy: %d in %s: %s", code, took.Round(time.Millisecond), body)
	if code != 503 || !strings.Contains(body, l.ID) {
		t.Fatalf("upload with Service Bus busy: %d %s, want 503 naming the ledger", code, body)
	}
	e.setFault(t, devhost.Fault{})
	if code, body, _ = upload(); code/100 != 2 {
		t.Fatalf("upload after the fault: %d %s", code, body)
	}
	e.waitIdle(ctx)
	e.checkFold(ctx, []*ledger.Ledger{l})
}

// TestPublishThroughDroppedConnections: queued ledgers are published while
// the namespace drops every connection again and again; the SDK reconnects,
// the publisher resumes, and every order matches its fold.
func TestPublishThroughDroppedConnections(t *testing.T) {
	ctx := timeout(t, 3*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, faultSettings)
	docs := workload(11, "drop", 6, 60, 8)
	stop := make(chan struct{})
	dropped := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				dropped <- n
				return
			case <-time.After(150 * time.Millisecond):
				n += e.host.Bus().DropConnections()
			}
		}
	}()
	var ledgers []*ledger.Ledger
	for _, doc := range docs {
		l, err := ledger.Parse(doc, ledger.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		ledgers = append(ledgers, l)
		// The test's own client is dropped too: retry its send as any producer would.
		for try := 0; ; try++ {
			sendCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := e.trySendLedger(sendCtx, l, doc)
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
