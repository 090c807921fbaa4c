package bench_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"go.opentelemetry.io/otel/trace"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/bench/commitshape"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/devhost/cmd/convoy-devhost/demo"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// BenchmarkThroughput (figure 3): OrderProcessor messages per second through
// the host emulation (the real handler binary, the host's encoding, session
// dispatch) with 8 concurrent sessions against Azurite, divided by what Go
// achieves against the same Azurite with the same concurrency: the
// processor's own commit submitted with the SDK (commitshape: the same keys,
// rows and properties), and ETag-conditional updates of the order's head.
// Batch mode ("cardinality": "many") takes one session at a time, as the
// real host does.
//
// This VM's speed drifts by tens of percent over seconds, so each subject
// run is bracketed by baseline runs right before and after it (averaged),
// and single mode is measured in 5 rounds, reported by their median and
// range.
func BenchmarkThroughput(b *testing.B) {
	const sessions, perOrder, rounds = 8, 400, 5
	total := sessions * perOrder
	az := sharedAzurite(b)
	for i := range b.N {
		// Each baseline writes to partitions named as the orders of the run it
		// brackets: the commit's shape includes its keys (commitshape).
		batchName := fmt.Sprintf("batch%d", i)
		before := rawWrites(b, az, orderIDs(batchName, sessions), total, conditionalUpdate)
		batch := pipeline(b, az, batchName, sessions, perOrder, true)
		raw := (before.rate + rawWrites(b, az, orderIDs(batchName, sessions), total, conditionalUpdate).rate) / 2

		var ratios, singles, rawTxs, azSingle, azTx []float64
		round := func(r int) string { return fmt.Sprintf("single%dr%d", i, r) }
		tx := rawWrites(b, az, orderIDs(round(0), sessions), total, commitShapedTransaction)
		for r := range rounds {
			single := pipeline(b, az, round(r), sessions, perOrder, false)
			after := rawWrites(b, az, orderIDs(round(r), sessions), total, commitShapedTransaction)
			rawTx := (tx.rate + after.rate) / 2
			ratios = append(ratios, single.rate/rawTx)
			singles, rawTxs = append(singles, single.rate), append(rawTxs, rawTx)
			azSingle = append(azSingle, perMessage(single.azuriteCPU, single.messages))
			azTx = append(azTx, (perMessage(tx.azuriteCPU, total)+perMessage(after.azuriteCPU, total))/2)
			tx = after
		}
		single := median(singles)
		ratio("throughput_single_vs_raw_transactions", median(ratios),
			fmt.Sprintf("single mode / the same commits submitted alone with the SDK (commitshape), 8 goroutines; median of %d bracketed rounds", rounds), atLeast(0.8))
		ratio("throughput_single_vs_raw_transactions_min", slices.Min(ratios), "the lowest of those rounds", target{})
		ratio("throughput_single_vs_raw_transactions_max", slices.Max(ratios), "the highest of those rounds", target{})
		ratio("throughput_single_vs_raw", single/raw,
			"OrderProcessor messages/s, one per invocation, 8 sessions / ETag-conditional updates of the head/s, 8 goroutines", target{})
		ratio("throughput_batch_vs_raw", batch.rate/raw,
			"the same in batch mode (up to 100 messages per invocation, one session at a time)", above(1))
		ratio("azurite_transaction_vs_update", median(rawTxs)/raw,
			"Azurite alone: commits (3-entity transactions)/s / conditional head updates/s (the ceiling of any atomic design)", target{})
		ratio("azurite_cpu_single_vs_raw_transactions", median(azSingle)/median(azTx),
			"Azurite's CPU per message during single mode / per transaction during the raw transactions around it", target{})
		rate := func(name string, v float64, what string) {
			record(figure{name: name, value: v, unit: "per_s", what: what})
		}
		rate("throughput_single", single, "OrderProcessor messages per second, single mode (median of the rounds)")
		rate("throughput_batch", batch.rate, "the same, batch mode")
		rate("raw_updates", raw, "conditional head updates per second (the baseline)")
		rate("raw_transactions", median(rawTxs), "commits (3-entity transactions) submitted alone per second")
	}
}

func perMessage(cpu time.Duration, n int) float64 { return float64(cpu) / float64(n) }

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// pipelineRun is what a pipeline run measured.
type pipelineRun struct {
	rate       float64       // messages processed per second
	handlerCPU time.Duration // the handler process's CPU over the run
	azuriteCPU time.Duration // Azurite's CPU over the run
	messages   int
	// logs are the OrderProcessor's lines the host kept from the calls'
	// Logs (Function.OrderProcessor.User), whatever LogLevel says.
	logs []string
}

// pipelineExtra is what a run adds to the plain one (the zero value: none).
type pipelineExtra struct {
	settings map[string]string // app settings besides the run's own
	trace    trace.SpanContext // the context every message is sent with (a ledger's publish span), if valid
	settled  func() bool       // polled (up to 30 s) once the queue is idle, before the CPU is read
}

// pipeline publishes sessions orders of perOrder transactions to the orders
// queue of a host emulation and measures, from the first send until the
// queue is empty, the messages processed per second and the handler
// process's CPU (user + system, from /proc, as rusage counts it).
func pipeline(b *testing.B, az *azurite.Server, name string, sessions, perOrder int, batch bool) pipelineRun {
	return pipelineWith(b, az, name, sessions, perOrder, batch, pipelineExtra{})
}

func pipelineWith(b *testing.B, az *azurite.Server, name string, sessions, perOrder int, batch bool, x pipelineExtra) pipelineRun {
	app := stagedApp(b, func(file string, doc map[string]any) {
		switch file {
		case "host.json":
			sb := doc["extensions"].(map[string]any)["serviceBus"].(map[string]any)
			sb["maxConcurrentSessions"] = sessions
			if batch {
				sb["sessionIdleTimeout"] = "00:00:00.1" // one session at a time: each waits this long once drained
			}
		case handler.FnOrderProcessor:
			if batch {
				doc["bindings"].([]any)[0].(map[string]any)["cardinality"] = "many"
			}
		}
	})
	queues, err := devhost.LoadQueueConfig(filepath.Join(root, "infra", "local", "servicebus-emulator-config.json"))
	if err != nil {
		b.Fatal(err)
	}
	tables := map[string]string{"OrdersTableName": name + "orders", "LedgersTableName": name + "ledgers"}
	for _, t := range tables { // created up front, as Bicep does in Azure, so that no run pays for it
		createTable(b, az, t)
	}
	settings := devhost.WithQueueSettings(map[string]string{
		"StateStorage": az.ConnectionString(), "LogFormat": "json", "LogLevel": "warn",
		"OrdersTableName": tables["OrdersTableName"], "LedgersTableName": tables["LedgersTableName"],
	})
	maps.Copy(settings, x.settings)
	h, err := devhost.Start(devhost.Options{AppDir: app.Dir, Queues: queues, Settings: settings})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Stop()
	ids := orderIDs(name, sessions)
	msgs := orderMessages(b, name, sessions*perOrder, ids)
	ctx := b.Context()
	bus, err := azservicebus.NewClientFromConnectionString(h.ServiceBusConnectionString(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close(ctx)
	sender, err := servicebus.NewSender(bus, "orders")
	if err != nil {
		b.Fatal(err)
	}

	// The processor's own handler process: on Flex (and in the emulation)
	// each non-HTTP function runs in a group of its own.
	processor := h.Group("function:OrderProcessor")[0]
	pid := processor.HandlerPID()
	cpu0, az0 := processCPU(b, pid), processCPU(b, az.PID())
	t0 := time.Now()
	sendCtx := ctx
	if x.trace.IsValid() {
		sendCtx = trace.ContextWithSpanContext(ctx, x.trace)
	}
	send(b, sendCtx, sender, msgs)
	q := h.Queue("orders")
	for !q.Idle() {
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(t0)
	for deadline := time.Now().Add(30 * time.Second); x.settled != nil && !x.settled() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if processor.HandlerPID() != pid {
		b.Fatalf("%s: the handler restarted during the run", name)
	}
	cpu, azCPU := processCPU(b, pid)-cpu0, processCPU(b, az.PID())-az0

	if h.Failures() != 0 {
		b.Fatalf("%s: %d invocations failed", name, h.Failures())
	}
	for _, id := range ids {
		v, err := demo.GetOrder(ctx, h.URL(), id)
		if err != nil || v.AppliedSeq != int64(perOrder) {
			b.Fatalf("%s: order %s applied seq %d, %v; want %d", name, id, v.AppliedSeq, err, perOrder)
		}
	}
	var logs []string
	for _, t := range h.Telemetry().Traces() {
		if t.Category == devhost.CategoryUser(handler.FnOrderProcessor) {
			logs = append(logs, t.Message)
		}
	}
	return pipelineRun{rate: float64(len(msgs)) / elapsed.Seconds(), handlerCPU: cpu, azuriteCPU: azCPU, messages: len(msgs), logs: logs}
}

// processCPU is a process's user + system CPU so far (/proc/<pid>/stat,
// fields 14 and 15, in clock ticks of 10 ms on Linux).
func processCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces: count fields after its ')'.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func send(b *testing.B, ctx context.Context, sender *servicebus.Sender, msgs []convoy.Envelope) {
	batch, _ := sender.NewBatch(ctx)
	for _, m := range msgs {
		if batch.Add(m) == convoy.ErrBatchFull {
			if err := sender.SendBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch, _ = sender.NewBatch(ctx)
			if err := batch.Add(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := sender.SendBatch(ctx, batch); err != nil {
		b.Fatal(err)
	}
}

func createTable(b *testing.B, az *azurite.Server, name string) {
	svc, err := aztables.NewServiceClientFromConnectionString(az.ConnectionString(), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.CreateTable(b.Context(), name, nil); err != nil {
		b.Fatal(err)
	}
}

// A write is one raw storage operation of the baselines; it returns the
// state the next one needs (an ETag).
type write func(ctx context.Context, t *aztables.Client, key string, seq int64, etag azcore.ETag) (azcore.ETag, error)

// rawRun is what a baseline run measured.
type rawRun struct {
	rate       float64       // writes per second
	azuriteCPU time.Duration // Azurite's CPU over the run
}

// rawWrites runs total writes from one goroutine per key, each on the
// partition of its key.
func rawWrites(b *testing.B, az *azurite.Server, keys []string, total int, w write) rawRun {
	table := az.NewTable(b, nil)
	az0 := processCPU(b, az.PID())
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	t0 := time.Now()
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var etag azcore.ETag
			var err error
			for seq := range int64(total / len(keys)) {
				if etag, err = w(b.Context(), table, key, seq+1, etag); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	azCPU := processCPU(b, az.PID()) - az0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return rawRun{rate: float64(total/len(keys)*len(keys)) / elapsed.Seconds(), azuriteCPU: azCPU}
}

// conditionalUpdate replaces the order's head if it is unchanged since the
// last write (If-Match), the cheapest compare-and-swap Table Storage offers.
func conditionalUpdate(ctx context.Context, t *aztables.Client, key string, seq int64, etag azcore.ETag) (azcore.ETag, error) {
	head := commitshape.Head(key, seq, time.Now())
	if seq == 1 {
		r, err := t.AddEntity(ctx, head, nil)
		return r.ETag, err
	}
	r, err := t.UpdateEntity(ctx, head, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
	return r.ETag, err
}

// commitShapedTransaction writes what one processor commit writes: a new
// marker, the head and a transaction row, in one entity-group transaction.
func commitShapedTransaction(ctx context.Context, t *aztables.Client, key string, seq int64, _ azcore.ETag) (azcore.ETag, error) {
	_, err := t.SubmitTransaction(ctx, commitshape.Actions(key, seq), nil)
	return "", err
}
