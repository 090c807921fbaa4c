package servicebus_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	_ "unsafe" // go:linkname

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/servicebus"
	"github.com/convoy-dev/convoy/handler/tracing"

	"go.opentelemetry.io/otel/trace"
)

// newMessageBatch is the SDK's own batch constructor (Sender.NewMessageBatch
// calls it with the link's maximum message size). Reaching it lets the test
// use the SDK's size accounting as the oracle, with no namespace.
//
//go:linkname newMessageBatch github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus.newMessageBatch
func newMessageBatch(maxBytes uint64) *azservicebus.MessageBatch

func randomMessage(r *rand.Rand) convoy.Envelope {
	n := func() int { // lengths around the 8/32-bit encoding boundary, and small ones
		return []int{0, 1, 5, 100, 200, 255, 256, 257, 300, 4000}[r.IntN(10)] + r.IntN(3)
	}
	id := func(max int) string { return strings.Repeat("a", 1+r.IntN(max)) }
	traceValue := func() string { // none, a traceparent, or a producer's longer value
		return []string{"", "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", strings.Repeat("t", 250+r.IntN(10))}[r.IntN(4)]
	}
	return convoy.Envelope{
		SessionID: id(100), MessageID: id(128), LedgerID: id(100),
		Seq:         []int64{1, 127, 128, 1 << 40, 1<<63 - 1}[r.IntN(5)],
		Last:        r.IntN(2) == 0,
		Body:        []byte(strings.Repeat("<", n())),
		TraceParent: traceValue(), DiagnosticID: traceValue(),
	}
}

// TestSizeAsTheSDKCounts: convoy.OrderMessage's sizes are what
// azservicebus.MessageBatch counts, for one message and for several.
func TestSizeAsTheSDKCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := newMessageBatch(1 << 30)
		first := randomMessage(r)
		if err := b.AddMessage(servicebus.ToMessage(first), nil); err != nil {
			t.Fatal(err)
		}
		if got, want := first.Size(), int(b.NumBytes()); got != want {
			t.Fatalf("Size() = %d, the SDK counts %d for %+v", got, want, first)
		}
		second := randomMessage(r)
		if err := b.AddMessage(servicebus.ToMessage(second), nil); err != nil {
			t.Fatal(err)
		}
		if got, want := first.Size()+second.PayloadBytes(), int(b.NumBytes()); got != want {
			t.Fatalf("a second message adds %d, the SDK counts %d in all", second.PayloadBytes(), want)
		}
	}
}

// TestSizeIsTheLimit: a message of exactly the limit fits the SDK's batch of
// that limit; one byte more does not.
func TestSizeIsTheLimit(t *testing.T) {
	m := convoy.Envelope{SessionID: "o-1", MessageID: "L:1", LedgerID: "L", Seq: 300, Body: []byte(strings.Repeat("x", 1000))}
	if err := newMessageBatch(uint64(m.Size())).AddMessage(servicebus.ToMessage(m), nil); err != nil {
		t.Fatalf("a message of exactly the limit: %v", err)
	}
	if err := newMessageBatch(uint64(m.Size()-1)).AddMessage(servicebus.ToMessage(m), nil); err != azservicebus.ErrMessageTooLarge {
		t.Fatalf("a message one byte over the limit: %v", err)
	}
}

// sdkSender sends nowhere but fills the SDK's own batches, of a given limit.
type sdkSender struct {
	limit uint64
	sizes []int // NumBytes of each batch sent
}

type sdkBatch struct{ mb *azservicebus.MessageBatch }

func (b *sdkBatch) Add(m convoy.Envelope) error {
	if err := b.mb.AddMessage(servicebus.ToMessage(m), nil); err == azservicebus.ErrMessageTooLarge {
		return convoy.ErrBatchFull
	} else if err != nil {
		return err
	}
	return nil
}
func (b *sdkBatch) Len() int { return int(b.mb.NumMessages()) }

func (s *sdkSender) NewBatch(context.Context) (convoy.Batch, error) {
	return &sdkBatch{mb: newMessageBatch(s.limit)}, nil
}
func (s *sdkSender) SendBatch(_ context.Context, b convoy.Batch) error {
	s.sizes = append(s.sizes, int(b.(*sdkBatch).mb.NumBytes()))
	return nil
}

// ordersUpTo are the domains of a ledger of orders sent to a queue whose
// messages are at most limit bytes.
func ordersUpTo(limit int) []ledger.Domain {
	return []ledger.Domain{{Rules: orders.Domain, MaxMessageBytes: limit}}
}

// publisherUpTo is a publisher of orders, whose records and seqs are
// store's, to sender, whose messages are at most limit bytes.
func publisherUpTo(store ledger.Store, sender convoy.Sender, limit int) *ledger.Publisher {
	return ledger.NewPublisher(store, []ledger.Route{{Domain: ordersUpTo(limit)[0], Allocator: store, Sender: sender}}, ledger.PublisherOptions{})
}

// TestLedgerMeasuredAsSent: a ledger whose data is HTML-heavy (json.Marshal
// would make each '<', '>' and '&' six bytes) is measured exactly as the SDK
// will count its messages, before any seq is allocated: at the limit it is
// published, one byte below it is refused whole and allocates nothing.
func TestLedgerMeasuredAsSent(t *testing.T) {
	html := strings.Repeat("<p>a&amp;b</p>", 280) // within orders.MaxDataBytes
	doc := []byte(`{"ledgerId":"L-html","transactions":[{"orderId":"o-1","op":"CreateOrder","currency":"EUR"},` +
		`{"orderId":"o-1","op":"AddTransaction","txId":"t-1","amount":5,"data":{"html":"` + html + `"}}]}`)
	ctx := context.Background()

	// The oracle: the SDK's count of the large message alone, with a seq
	// above 127 (full-width, as Parse assumes before seqs are known) and
	// the trace context the sender stamps (traceparent and Diagnostic-Id).
	alone := &sdkSender{limit: 1 << 30}
	l, err := ledger.Parse(doc, ledger.Limits{}, ordersUpTo(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := orders.NewOrderMessage(l.ID, 1, 300, false, l.Entry(1).Command.(orders.Transaction))
	m.TraceParent, m.DiagnosticID = tracing.Stamp("", "", trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}}))
	b, _ := alone.NewBatch(ctx)
	if err := b.Add(m); err != nil {
		t.Fatal(err)
	}
	limit := int(b.(*sdkBatch).mb.NumBytes())
	if limit < len(html) || limit > len(html)+1024 {
		t.Fatalf("the SDK counts %d bytes for %d bytes of data: HTML escaped?", limit, len(html))
	}

	if _, err := ledger.Parse(doc, ledger.Limits{}, ordersUpTo(limit)); err != nil {
		t.Fatalf("at exactly the size the SDK counts: %v", err)
	}
	_, err = ledger.Parse(doc, ledger.Limits{}, ordersUpTo(limit-1))
	if ps := fault.ProblemsOf(err); len(ps) != 1 || ps[0].Index != 1 || ps[0].Field != "data" {
		t.Fatalf("one byte below: %v %+v, want one problem on transaction 1's data", err, ps)
	}

	allocs := 0
	refusing := memstore.NewLedgers()
	refusing.Fail = func(op string) error {
		if op == "allocate" {
			allocs++
		}
		return nil
	}
	_, err = publisherUpTo(refusing, &sdkSender{limit: uint64(limit - 1)}, limit-1).Publish(ctx, doc)
	if fault.CodeOf(err) != fault.Invalid || allocs != 0 {
		t.Fatalf("refused ledger: %v after %d allocations, want invalid and none", err, allocs)
	}
	sent := &sdkSender{limit: uint64(limit)}
	if _, err := publisherUpTo(memstore.NewLedgers(), sent, limit).Publish(ctx, doc); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
}

// TestTooLargeAfterAllocationFails: a queue whose real limit is below the
// setting the ledger was measured against fails the delivery (internal
// error, retried then dead-lettered), never rejects a ledger whose seqs are
// taken.
func TestTooLargeAfterAllocationFails(t *testing.T) {
	doc := []byte(`{"ledgerId":"L-big","transactions":[{"orderId":"o-1","op":"DeleteOrder","data":{"x":"` + strings.Repeat("y", 3000) + `"}}]}`)
	_, err := publisherUpTo(memstore.NewLedgers(), &sdkSender{limit: 2000}, 1<<20).Publish(context.Background(), doc)
	if fault.CodeOf(err) != fault.Internal {
		t.Fatalf("got %v (%s), want an internal error", err, fault.CodeOf(err))
	}
}
