package servicebus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// stalling is a Service Bus namespace that accepts connections, reads what
// they send and never writes a byte (a black-holed network path).
func stalling(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;", l.Addr())
}

// stalledReplayer is the program's replayer (replay.Order on this
// package's DeadLetters) noting whether the route's own deadline had passed
// when the replay gave up.
type stalledReplayer struct {
	client *azservicebus.Client
	mu     sync.Mutex
	past   []bool
}

func (r *stalledReplayer) Replay(ctx context.Context, orderID string) (replay.Report, error) {
	dl, err := servicebus.NewDeadLetters(r.client, "orders")
	if err != nil {
		return replay.Report{OrderID: orderID, Replayed: []replay.Replayed{}}, err
	}
	defer dl.Close(context.Background())
	rep, err := replay.Order(ctx, dl, &ledgertest.Sender{}, orderID, replay.Options{})
	r.mu.Lock()
	r.past = append(r.past, ctx.Err() != nil)
	r.mu.Unlock()
	return rep, err
}

func (r *stalledReplayer) ReplayAll(ctx context.Context, _ int, _ string) (replay.Progress, error) {
	return replay.Progress{}, nil
}

// TestStalledReplayAnswersByItself (issue 33, item 9): with Service Bus
// accepting connections and never answering, a replay answers 503 "Service
// Bus did not answer in time" on its own, the operation given up by
// OperationTimeout, before the route's target for that answer
// (handler.UnavailableAnswer) has passed: run under that target as its
// deadline, the route's context is still live when the replay returns. With
// OperationTimeout equal to the target, the answer only ever came after it.
func TestStalledReplayAnswersByItself(t *testing.T) {
	if margin := handler.UnavailableAnswer - servicebus.OperationTimeout; margin < time.Second {
		t.Errorf("servicebus.OperationTimeout %s leaves %s of handler.UnavailableAnswer %s for the rest of the call (reading the order, closing the receivers, answering): want a second at least",
			servicebus.OperationTimeout, margin, handler.UnavailableAnswer)
	}
	client, err := azservicebus.NewClientFromConnectionString(stalling(t), servicebus.ClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	r := &stalledReplayer{client: client}
	h := handler.New(handler.Deps{Domains: []handler.Domain{{Rules: orders.Domain, Replay: r}},
		Deadlines: map[string]time.Duration{handler.FnReplayOrder: handler.UnavailableAnswer}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/orders/o-1/replay", nil))
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	msg := fmt.Sprint(body["error"])
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(msg, "Service Bus did not answer in time") || strings.Contains(msg, "deadline of") {
		t.Fatalf("replay with Service Bus stalled: %d %v, want 503 saying Service Bus did not answer in time", rec.Code, body)
	}
	if len(r.past) != 1 || r.past[0] {
		t.Fatalf("the replay gave up only once the route's deadline of %s had passed (%v): its Service Bus operation must give up first", handler.UnavailableAnswer, r.past)
	}
}
