// Package demo is what `make demo` runs (convoy-devhost demo): the whole
// pipeline on this machine, and the checks the end-to-end tests share with
// it (an order as the handler answers it against the fold of its
// transactions).
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/servicebus"
	"github.com/convoy-dev/convoy/handler/settings"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// Options configure Run.
type Options struct {
	AppDir      string    // staged app (dist/)
	LedgersDir  string    // sample ledgers, published in name order
	QueueConfig string    // infra/local/servicebus-emulator-config.json
	Late        string    // the ledger whose publisher stalls until the next one is processed
	Out         io.Writer // what a person reads
	Log         io.Writer // the emulation's and the handler's log
}

// Run runs the whole pipeline locally: Azurite, the host and queue
// emulation, the real handler; it publishes the sample ledgers, one pair out
// of order, waits until everything is processed, prints every order and
// checks it against the fold of its transactions in seq order.
func Run(ctx context.Context, o Options) error {
	out := o.Out
	files, _ := filepath.Glob(filepath.Join(o.LedgersDir, "*.json"))
	sort.Strings(files)
	if len(files) == 0 {
		return fmt.Errorf("no ledgers in %s", o.LedgersDir)
	}
	queues, err := devhost.LoadQueueConfig(o.QueueConfig)
	if err != nil {
		return err
	}
	az, err := azurite.Start(azurite.Options{})
	if err != nil {
		return err
	}
	defer az.Stop()
	appSettings := map[string]string{"StateStorage": az.ConnectionString(), "AzureWebJobsStorage": az.ConnectionString(),
		"OrdersQueueName": "orders", "LedgersQueueName": "ledgers", "LogLevel": "info"}
	h, err := devhost.Start(devhost.Options{AppDir: o.AppDir, Settings: appSettings, Queues: queues, Log: o.Log})
	if err != nil {
		return err
	}
	defer h.Stop()
	fmt.Fprintf(out, "convoy demo: Azurite on 127.0.0.1:%d, the handler %s under the local host and Service Bus emulation at %s\n\n",
		az.Port, filepath.Join(o.AppDir, "convoy"), h.URL())

	bus, err := azservicebus.NewClientFromConnectionString(h.ServiceBusConnectionString(), nil)
	if err != nil {
		return err
	}
	defer bus.Close(context.Background())
	ledgersQueue, err := servicebus.NewSender(bus, "ledgers")
	if err != nil {
		return err
	}
	var docs []*ledger.Ledger
	var late *lateLedger
	for _, file := range files {
		doc, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		l, err := ledger.Parse(doc, ledger.Limits{})
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		docs = append(docs, l)
		name := filepath.Base(file)
		if name == o.Late {
			if late, err = stallPublisher(ctx, az, bus, doc); err != nil {
				return err
			}
			fmt.Fprintf(out, "%-20s a second publisher allocated its seqs for %d orders, then stalled before sending\n", name, len(l.Orders()))
			continue
		}
		if err := ledgersQueue.SendLedger(ctx, l.ID, l.Stream, doc); err != nil {
			return fmt.Errorf("publish %s: %w", name, err)
		}
		if err := h.WaitIdle(ctx, 300*time.Millisecond); err != nil {
			return err
		}
		fmt.Fprintf(out, "%-20s published through the ledgers queue: %d transactions for %d orders\n", name, len(l.Entries), len(l.Orders()))
		if late != nil {
			if err := showBlocked(ctx, out, h.URL(), allOrders(docs)); err != nil {
				return err
			}
		}
	}
	if late != nil {
		close(late.release)
		if err := <-late.done; err != nil {
			return fmt.Errorf("the stalled publisher: %w", err)
		}
		fmt.Fprintf(out, "%-20s the stalled publisher resumed and sent its messages\n", o.Late)
	}
	if err := h.WaitIdle(ctx, 500*time.Millisecond); err != nil {
		return err
	}
	return report(ctx, out, h, docs)
}

// lateLedger is a ledger whose publisher waits, after allocating its seqs,
// until release is closed: the messages of the ledger after it, published
// later but sent first, arrive before its own.
type lateLedger struct {
	release chan struct{}
	done    chan error
}

func stallPublisher(ctx context.Context, az *azurite.Server, bus *azservicebus.Client, doc []byte) (*lateLedger, error) {
	svc, err := aztables.NewServiceClientFromConnectionString(az.ConnectionString(), nil)
	if err != nil {
		return nil, err
	}
	late := &lateLedger{release: make(chan struct{}), done: make(chan error, 1)}
	allocated := make(chan struct{})
	orders, err := servicebus.NewSender(bus, "orders")
	if err != nil {
		return nil, err
	}
	sender := &gatedSender{Sender: orders, reached: allocated, release: late.release}
	pub := ledger.NewPublisher(tablestore.NewLedgers(svc.NewClient(settings.DefaultLedgersTable)), sender, ledger.PublisherOptions{})
	go func() {
		_, err := pub.Publish(ctx, doc)
		late.done <- err
	}()
	select {
	case <-allocated:
		return late, nil
	case err := <-late.done:
		return nil, fmt.Errorf("the stalled publisher ended early: %v", err)
	}
}

// gatedSender signals when the publisher first wants a batch (its seqs are
// allocated by then) and holds it until release.
type gatedSender struct {
	*servicebus.Sender
	reached chan struct{}
	release chan struct{}
	once    bool
}

func (g *gatedSender) NewBatch(ctx context.Context) (convoy.Batch, error) {
	if !g.once {
		g.once = true
		close(g.reached)
		<-g.release
	}
	return g.Sender.NewBatch(ctx)
}

func allOrders(docs []*ledger.Ledger) []string {
	var ids []string
	for _, l := range docs {
		for _, id := range l.Orders() {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// GetOrder reads an order's state through the front end, as a user would.
func GetOrder(ctx context.Context, base, id string) (orders.View, error) {
	var v orders.View
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/orders/"+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET /api/orders/%s: %s", id, resp.Status)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

func showBlocked(ctx context.Context, out io.Writer, base string, ids []string) error {
	for _, id := range ids {
		v, err := GetOrder(ctx, base, id)
		if err != nil {
			return err
		}
		if v.Parked > 0 {
			fmt.Fprintf(out, "%-20s   %s is blocked: %d message(s) parked, waiting for seq %d\n", "", id, v.Parked, v.MissingSeq)
		}
	}
	return nil
}

// ExpectedOrders folds each order's transactions in seq order with the
// independent fold (package convoytest), never with convoy.Key itself. The
// seqs are those the order messages actually carried (sent: the orders
// queue's journal), since ledgers published concurrently allocate in any order.
func ExpectedOrders(ledgers []*ledger.Ledger, sent []devbus.Message) (map[string]convoytest.Expected, error) {
	entries := map[string]ledger.Entry{}
	for _, l := range ledgers {
		for i, e := range l.Entries {
			entries[convoy.MessageID(l.ID, i)] = e
		}
	}
	bySeq := map[string]map[int64]ledger.Entry{}
	for _, m := range sent {
		e, ok := entries[m.MessageID]
		if !ok {
			continue // not a ledger's message (a test's re-send)
		}
		seq, ok := convoy.IntProperty(m.Properties[convoy.PropSeq])
		if !ok {
			return nil, fmt.Errorf("message %s has no seq", m.MessageID)
		}
		if bySeq[e.OrderID] == nil {
			bySeq[e.OrderID] = map[int64]ledger.Entry{}
		}
		bySeq[e.OrderID][seq] = e
	}
	want := map[string]convoytest.Expected{}
	for id, txs := range bySeq {
		var msgs []convoy.Message
		for _, seq := range slices.Sorted(maps.Keys(txs)) {
			if seq != int64(len(msgs))+1 {
				return nil, fmt.Errorf("order %s: no message carried seq %d", id, len(msgs)+1)
			}
			msgs = append(msgs, convoy.Message{Seq: seq, Last: txs[seq].Last, Command: txs[seq].Transaction})
		}
		want[id] = convoytest.Fold(msgs)
	}
	return want, nil
}

// report prints every order and compares it with the fold of its
// transactions in seq order (ledgers in allocation order).
func report(ctx context.Context, out io.Writer, h *devhost.Host, docs []*ledger.Ledger) error {
	expected, err := ExpectedOrders(docs, h.Queue("orders").Sent())
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER\tSTATUS\tCOMPLETE\tAPPLIED SEQ\tTOTAL (minor units)\tTRANSACTIONS\tREJECTED\tPARKED\tMATCHES FOLD")
	var mismatches, rejections []string
	for _, id := range allOrders(docs) {
		v, err := GetOrder(ctx, h.URL(), id)
		if err != nil {
			return err
		}
		problem := CompareViews(v, expected[id])
		mark := "yes"
		if problem != "" {
			mark = "NO: " + problem
			mismatches = append(mismatches, id+": "+problem)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s %d\t%d\t%d\t%d\t%s\n", id, v.Status, yesNo(v.Complete), v.AppliedSeq, v.Currency, v.Total,
			len(v.Transactions), len(v.Rejected), v.Parked, mark)
		for _, r := range v.Rejected {
			rejections = append(rejections, fmt.Sprintf("  %s seq %d %s: %s", id, r.Seq, r.Op, r.Reason))
		}
	}
	tw.Flush()
	if len(rejections) > 0 {
		fmt.Fprintln(out, "\nRejected (business rules; each consumed its seq, nothing was lost):")
		fmt.Fprintln(out, strings.Join(rejections, "\n"))
	}
	fmt.Fprintf(out, "\n%d handler invocations, %d failed, %d handler restarts; dead-lettered: %d\n",
		h.Invocations(), h.Failures(), h.Restarts(), h.Queue("orders").Stats().DeadLettered)
	if len(mismatches) > 0 {
		return fmt.Errorf("%d order(s) differ from the expected fold:\n  %s", len(mismatches), strings.Join(mismatches, "\n  "))
	}
	fmt.Fprintf(out, "All %d orders match the fold of their transactions in seq order.\n", len(expected))
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// CompareViews returns how got differs from want ("" if it does not).
func CompareViews(got orders.View, want convoytest.Expected) string {
	return convoytest.CompareView(got, want)
}
