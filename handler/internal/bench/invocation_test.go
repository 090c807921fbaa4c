package bench_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/invocation"
	"github.com/convoy-dev/convoy/handler/orders"
)

// BenchmarkInvocationOverhead (figure 1): an OrderProcessor invocation over
// HTTP (the host's encoding decoded, the rules applied, an in-memory store,
// logging on) against a bare route on the same server that reads the same
// payload and answers {}. Requests alternate, which goes first alternating
// too, so that both sides see the same machine.
func BenchmarkInvocationOverhead(b *testing.B) {
	const pairs, nOrders = 10_000, 100
	fn := function(b, stagedApp(b, nil), handler.FnOrderProcessor)
	store := memstore.New()
	e := handler.New(handler.Deps{Domains: []handler.Domain{{Rules: orders.Domain, Processor: convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}), Keys: store}},
		Logger: handler.NewLogger("json", "info", io.Discard, io.Discard)})
	e.POST("/Bare", func(c echo.Context) error {
		if _, err := io.ReadAll(c.Request().Body); err != nil {
			return err
		}
		return c.JSONBlob(http.StatusOK, []byte("{}"))
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	client := srv.Client()

	var bare, subject []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ids := orderIDs(fmt.Sprintf("inv%d", i), nOrders)
		msgs := orderMessages(b, fmt.Sprintf("inv%d", i), pairs, ids)
		bodies := make([][]byte, len(msgs))
		for k, m := range msgs {
			bodies[k] = devhostEncode(fn, m)
		}
		b.StartTimer()
		for k, body := range bodies {
			first, second := "/Bare", "/"+fn.Name
			if k%2 == 1 {
				first, second = second, first
			}
			d1, d2 := post(b, client, srv.URL+first, body), post(b, client, srv.URL+second, body)
			if first == "/Bare" {
				bare, subject = append(bare, d1), append(subject, d2)
			} else {
				bare, subject = append(bare, d2), append(subject, d1)
			}
		}
		b.StopTimer()
		for _, id := range ids { // the invocations did the work: every order has all its messages applied
			o, err := store.Load(b.Context(), id)
			if err != nil || o.AppliedSeq != pairs/nOrders {
				b.Fatalf("order %s: applied seq %d, %v; want %d", id, o.AppliedSeq, err, pairs/nOrders)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	decode := decodeCost(b, fn, nOrders)
	ratio("invocation_median_ratio", quantile(subject, 0.5).Seconds()/quantile(bare, 0.5).Seconds(),
		"OrderProcessor invocation over HTTP (decode, rules, in-memory store) / bare {} route, median latency", atMost(1.3))
	ratio("invocation_p99_ratio", quantile(subject, 0.99).Seconds()/quantile(bare, 0.99).Seconds(),
		"the same at the 99th percentile", atMost(1.3))
	record(figure{name: "invocation_median", value: float64(quantile(subject, 0.5).Microseconds()), unit: "us",
		what: fmt.Sprintf("OrderProcessor invocation, median (bare route: %d us)", quantile(bare, 0.5).Microseconds())})
	record(figure{name: "invocation_decode", value: float64(decode.Microseconds()), unit: "us",
		what: "of which decoding the host's payload (invocation.Parse and ServiceBusMessages), median"})
}

// decodeCost is the median time to decode one invocation payload.
func decodeCost(b *testing.B, fn devhost.Function, orders int) time.Duration {
	msgs := orderMessages(b, "decode", 2000, orderIDs("decode", orders))
	ds := make([]time.Duration, len(msgs))
	for k, m := range msgs {
		body := devhostEncode(fn, m)
		t0 := time.Now()
		r, err := invocation.Parse(body)
		if err == nil {
			_, err = r.ServiceBusMessages("message")
		}
		ds[k] = time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
	}
	return quantile(ds, 0.5)
}

func post(b *testing.B, client *http.Client, url string, body []byte) time.Duration {
	t0 := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %d %s %v", url, resp.StatusCode, out, err)
	}
	return d
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
