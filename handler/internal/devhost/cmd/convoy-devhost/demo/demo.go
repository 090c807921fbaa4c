// Package demo is what `make demo` runs (convoy-devhost demo): the whole
// pipeline on this machine, and the checks the end-to-end tests share with
// it: an order as the handler answers it against the fold of its
// transactions, an account against the fold of its commands.
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
	"sync"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/keyed"
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
// every account and checks each against the fold of its commands in seq
// order.
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
	appSettings := devhost.WithQueueSettings(map[string]string{"StateStorage": az.ConnectionString(), "AzureWebJobsStorage": az.ConnectionString(),
		"LogLevel": "info"})
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
		l, err := ledger.Parse(doc, ledger.Limits{}, ledgerDomains())
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		docs = append(docs, l)
		name := filepath.Base(file)
		if name == o.Late {
			if late, err = stallPublisher(ctx, az, bus, doc); err != nil {
				return err
			}
			fmt.Fprintf(out, "%-20s a second publisher allocated its seqs for %s, then stalled before sending\n", name, keysOf(l))
			continue
		}
		if err := ledgersQueue.SendLedger(ctx, l.ID, l.Stream, doc); err != nil {
			return fmt.Errorf("publish %s: %w", name, err)
		}
		if err := h.WaitIdle(ctx, 300*time.Millisecond); err != nil {
			return err
		}
		fmt.Fprintf(out, "%-20s published through the ledgers queue: %d transactions for %s\n", name, l.Len(), keysOf(l))
		if late != nil {
			if err := showBlocked(ctx, out, h.URL(), docs); err != nil {
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

// ledgerDomains are the registered domains, as the app reads a ledger's
// entries: the sample ledgers hold orders and accounts.
func ledgerDomains() []ledger.Domain {
	ds := make([]ledger.Domain, len(domains.All))
	for i, d := range domains.All {
		ds[i] = ledger.Domain{Rules: d}
	}
	return ds
}

// keysOf says how many keys of each domain a ledger holds entries of: "4
// orders and 2 accounts".
func keysOf(l *ledger.Ledger) string {
	var parts []string
	for _, d := range domains.All {
		switch n := len(l.Keys(d.Name())); n {
		case 0:
		case 1:
			parts = append(parts, "1 "+d.Noun())
		default:
			parts = append(parts, fmt.Sprintf("%d %s", n, d.Name()))
		}
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// lateLedger is a ledger whose publisher waits, after allocating its seqs,
// until release is closed: the messages of the ledger after it, published
// later but sent first, arrive before its own (orders and accounts alike).
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
	g := &gate{reached: make(chan struct{}), release: late.release}
	ledgers := tablestore.NewLedgers(svc.NewClient(settings.DefaultLedgersTable))
	var routes []ledger.Route
	for _, d := range ledgerDomains() {
		queue, err := servicebus.NewSender(bus, settings.DefaultQueue(d.Rules))
		if err != nil {
			return nil, err
		}
		routes = append(routes, ledger.Route{Domain: d, Allocator: ledgers.Keys(d.Rules.Noun()), Sender: &gatedSender{Sender: queue, gate: g}})
	}
	pub := ledger.NewPublisher(ledgers, routes, ledger.PublisherOptions{})
	go func() {
		_, err := pub.Publish(ctx, doc)
		late.done <- err
	}()
	select {
	case <-g.reached:
		return late, nil
	case err := <-late.done:
		return nil, fmt.Errorf("the stalled publisher ended early: %v", err)
	}
}

// gate is passed once, by the publisher's first batch of any domain (every
// seq is allocated by then): it signals reached, and holds that batch until
// release.
type gate struct {
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

// gatedSender is a domain's queue behind the ledger's gate.
type gatedSender struct {
	*servicebus.Sender
	gate *gate
}

func (g *gatedSender) NewBatch(ctx context.Context) (convoy.Batch, error) {
	g.gate.once.Do(func() {
		close(g.gate.reached)
		<-g.gate.release
	})
	return g.Sender.NewBatch(ctx)
}

// allKeys are the keys of domain (a Name) the ledgers hold entries of,
// sorted.
func allKeys(docs []*ledger.Ledger, domain string) []string {
	var ids []string
	for _, l := range docs {
		for _, id := range l.Keys(domain) {
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
	return v, getJSON(ctx, base+"/api/orders/"+id, &v)
}

func getJSON(ctx context.Context, url string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, path, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
		return fmt.Errorf("GET /%s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// showBlocked prints the keys of every domain that wait behind a gap.
func showBlocked(ctx context.Context, out io.Writer, base string, docs []*ledger.Ledger) error {
	for _, d := range domains.All {
		for _, id := range allKeys(docs, d.Name()) {
			var v struct{ Parked, MissingSeq int64 }
			if err := getJSON(ctx, base+"/api/"+d.Name()+"/"+id, &v); err != nil {
				return err
			}
			if v.Parked > 0 {
				fmt.Fprintf(out, "%-20s   %s is blocked: %d message(s) parked, waiting for seq %d\n", "", id, v.Parked, v.MissingSeq)
			}
		}
	}
	return nil
}

// ExpectedOrders folds each order's transactions in seq order with the
// independent fold (package convoytest), never with convoy.Key itself. The
// seqs are those the order messages actually carried (sent: the orders
// queue's journal), since ledgers published concurrently allocate in any order.
func ExpectedOrders(ledgers []*ledger.Ledger, sent []devbus.Message) (map[string]convoytest.Expected, error) {
	byKey, err := InSeqOrder(ledgers, orders.Domain, sent)
	if err != nil {
		return nil, err
	}
	want := map[string]convoytest.Expected{}
	for id, txs := range byKey {
		msgs := make([]convoy.Message, len(txs))
		for i, e := range txs {
			msgs[i] = convoy.Message{Seq: int64(i) + 1, Last: e.Last, Command: e.Command}
		}
		want[id] = convoytest.Fold(msgs)
	}
	return want, nil
}

// InSeqOrder is each key of domain with the ledger entries its messages
// carried, in the order of the seqs they carried (sent: the domain queue's
// journal, which keeps no bodies: a message is known by its MessageId,
// ledgerId:index), from seq 1 without a hole.
func InSeqOrder(ledgers []*ledger.Ledger, domain keyed.Domain, sent []devbus.Message) (map[string][]ledger.Entry, error) {
	entries := map[string]ledger.Entry{}
	for _, l := range ledgers {
		for i, e := range l.Entries() {
			if e.Domain == domain.Name() {
				entries[convoy.MessageID(l.ID, i)] = e
			}
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
		if bySeq[e.Key] == nil {
			bySeq[e.Key] = map[int64]ledger.Entry{}
		}
		bySeq[e.Key][seq] = e
	}
	out := map[string][]ledger.Entry{}
	for id, es := range bySeq {
		for _, seq := range slices.Sorted(maps.Keys(es)) {
			if seq != int64(len(out[id]))+1 {
				return nil, fmt.Errorf("%s %s: no message carried seq %d", domain.Noun(), id, len(out[id])+1)
			}
			out[id] = append(out[id], es[seq])
		}
	}
	return out, nil
}

// report prints every order and every account and compares each with the
// fold of its commands in seq order (ledgers in allocation order).
func report(ctx context.Context, out io.Writer, h *devhost.Host, docs []*ledger.Ledger) error {
	expected, err := ExpectedOrders(docs, h.Queue("orders").Sent())
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER\tSTATUS\tCOMPLETE\tAPPLIED SEQ\tTOTAL (minor units)\tTRANSACTIONS\tREJECTED\tPARKED\tMATCHES FOLD")
	var mismatches, rejections []string
	for _, id := range allKeys(docs, orders.Domain.Name()) {
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
	printRejections(out, rejections)
	accountMismatches, nAccounts, err := reportAccounts(ctx, out, h.URL(), docs, h.Queue("accounts").Sent())
	if err != nil {
		return err
	}
	deadLettered := 0
	for _, d := range domains.All {
		deadLettered += h.Queue(settings.DefaultQueue(d)).Stats().DeadLettered
	}
	fmt.Fprintf(out, "\n%d handler invocations, %d failed, %d handler restarts; dead-lettered: %d\n",
		h.Invocations(), h.Failures(), h.Restarts(), deadLettered)
	if len(mismatches) > 0 || len(accountMismatches) > 0 {
		return fmt.Errorf("%d order(s) and %d account(s) differ from the expected fold:\n  %s", len(mismatches), len(accountMismatches),
			strings.Join(append(mismatches, accountMismatches...), "\n  "))
	}
	fmt.Fprintf(out, "All %d orders match the fold of their transactions in seq order.\n", len(expected))
	fmt.Fprintf(out, "All %d accounts match the fold of their commands in seq order.\n", nAccounts)
	return nil
}

// printRejections lists the commands a table's keys rejected, if any.
func printRejections(out io.Writer, rejections []string) {
	if len(rejections) > 0 {
		fmt.Fprintln(out, "\nRejected (business rules; each consumed its seq, nothing was lost):")
		fmt.Fprintln(out, strings.Join(rejections, "\n"))
	}
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
