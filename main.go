// Command convoy is the Azure Functions custom handler of the Sequential
// Convoy. Started by the Functions host (no arguments) it serves the
// functions on 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT until SIGTERM;
// `convoy publish` sends ledgers for users. This file is the composition
// root: it reads the settings and builds every client once.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/localbus"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/servicebus"
	"github.com/convoy-dev/convoy/handler/settings"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

const usage = `usage:
  convoy                     serve the functions (how the Functions host starts it)
  convoy publish [flags] FILE...
                             send ledger files ("-" for stdin) to the ledgers queue,
                             or with --direct de-batch them onto the orders queue here
  convoy replay ORDERID...   re-send an order's dead-lettered messages in seq order
  convoy replay --all [--max N]
                             re-send every placeable dead letter, grouped by order, in
                             seq order per order, N per round, with a progress line per round
Settings come from the environment, then from local.settings.json (--settings).`

func main() {
	cmd, args := "serve", os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve()
	case "publish":
		err = publish(args)
	case "replay":
		err = replayOrders(args)
	case "help":
		fmt.Println(usage)
	default:
		err = fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "convoy:", err)
		var stopped signalStop
		if errors.As(err, &stopped) {
			os.Exit(stopped.code())
		}
		os.Exit(1)
	}
}

// signalStop: the handler stopped on a signal after finishing its in-flight
// invocations. It still exits non-zero (128 + the signal, as shells report
// it): the Functions host never restarts a handler that exits 0
// (WorkerProcess.OnProcessExited), and a host that is still running needs one.
type signalStop struct{ sig os.Signal }

func (s signalStop) Error() string {
	return fmt.Sprintf("stopped on %v after finishing in-flight invocations", s.sig)
}

func (s signalStop) code() int {
	if n, ok := s.sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

func serve() error {
	cfg, err := settings.Load(os.LookupEnv)
	if err != nil {
		return fmt.Errorf("invalid settings:\n%w", err)
	}
	log := handler.NewLogger(cfg.LogFormat, cfg.LogLevel, os.Stdout, os.Stderr)
	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	defer c.close()

	store := c.orderStore(cfg.OrdersTable)
	processor := convoy.NewProcessor(store, convoy.ProcessorOptions{
		CacheSize: cfg.OrderCacheSize,
		Retry:     fault.RetryPolicy{MaxElapsed: cfg.RetryBudget},
		Index:     store,
	})
	publisher, err := c.publisher(cfg, nil)
	if err != nil {
		return err
	}
	e := handler.New(handler.Deps{Processor: processor, Orders: store, Ledgers: publisher, Blocked: store,
		Replay: replayer{c: c, queue: cfg.OrdersQueue, opts: replay.Options{MaxScan: cfg.ReplayScanLimit, Orders: store}}, Logger: log, MaxRequestBytes: cfg.MaxRequestBytes})

	// 127.0.0.1 only: the host always calls http://127.0.0.1:PORT.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("custom handler listening", "addr", ln.Addr().String(), "ordersQueue", cfg.OrdersQueue, "ordersTable", cfg.OrdersTable)
	if cfg.ServiceBus.Local != "" {
		log.Warn("publishing through " + localbus.Describe(cfg.ServiceBus.Local))
	}

	var sig os.Signal
	select {
	case err := <-done:
		return err
	case sig = <-signals:
	}
	log.Info("shutting down: finishing in-flight invocations", "timeout", cfg.ShutdownTimeout.String())
	shutdown, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("in-flight invocations did not finish within %s: %w", cfg.ShutdownTimeout, err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return signalStop{sig}
}

func publish(args []string) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	direct := fs.Bool("direct", false, "de-batch the ledger here, onto the orders queue (needs StateStorage), instead of sending it to the ledgers queue")
	stream := fs.String("stream", "", "the ledger's stream (its SessionId on the ledgers queue), replacing the document's own; default: the document's, else \"default\"")
	return userCommand(fs, args, "ledger file (or - for stdin)", func() bool { return *direct },
		func(ctx context.Context, cfg settings.Settings, c *clients, name string, out *json.Encoder) error {
			doc, err := readFile(name)
			if err != nil {
				return err
			}
			if *stream != "" {
				// The stream is part of the ledger's content: the document says it,
				// so that the handler and an idempotent resend see the same ledger.
				if doc, err = ledger.WithStream(doc, *stream); err != nil {
					return describe(name, err)
				}
			}
			if *direct {
				pub, err := c.publisher(cfg, progressPrinter(name))
				if err != nil {
					return err
				}
				sum, err := pub.Publish(ctx, doc)
				if err != nil {
					return describe(name, err)
				}
				return out.Encode(sum)
			}
			// Validate here too: an invalid ledger is better refused now than recorded as rejected later.
			l, err := ledger.Parse(doc, ledger.Limits{MaxTransactions: cfg.MaxTransactions, MaxMessageBytes: cfg.MaxMessageBytes})
			if err != nil {
				return describe(name, err)
			}
			sender, err := c.sender(cfg.LedgersQueue)
			if err != nil {
				return err
			}
			if err := sender.SendLedger(ctx, l.ID, l.Stream, doc); err != nil {
				return describe(name, err)
			}
			return out.Encode(map[string]any{"ledgerId": l.ID, "stream": l.Stream, "queue": cfg.LedgersQueue, "transactions": len(l.Entries),
				"orders": len(l.Orders()), "bytes": len(doc), "outcome": "sent"})
		})
}

func replayOrders(args []string) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	all := fs.Bool("all", false, "replay every placeable dead letter of the orders queue instead of named orders")
	max := fs.Int("max", replay.DefaultAllMax, "with --all: dead letters received per round (at most ReplayScanLimit)")
	fs.String("settings", "local.settings.json", "file whose Values fill in settings missing from the environment")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *all {
		if fs.NArg() > 0 {
			return fmt.Errorf("replay --all takes no order ids")
		}
		return replayAll(fs, *max)
	}
	return userCommand(fs, nil, "order id", func() bool { return false },
		func(ctx context.Context, cfg settings.Settings, c *clients, id string, out *json.Encoder) error {
			rep, err := newReplayer(cfg, c).Replay(ctx, id)
			_ = out.Encode(rep)
			if err != nil {
				return describe(id, err)
			}
			if rep.Incomplete != nil {
				return fmt.Errorf("%s: incomplete: %s", id, rep.Incomplete.Reason)
			}
			return nil
		}, fs.Args()...)
}

// replayAll runs replay.All round after round until done, with a progress
// line per round on stderr and the last round's JSON on stdout. Dead letters
// locked by another reader are waited for (a lock lasts the queue's lock
// duration) up to lockWaits times in a row.
func replayAll(fs *flag.FlagSet, max int) error {
	const lockWaits, lockWait = 12, 10 * time.Second
	return userCommand(fs, nil, "", func() bool { return false },
		func(ctx context.Context, cfg settings.Settings, c *clients, _ string, out *json.Encoder) error {
			r := newReplayer(cfg, c)
			token, waits := "", 0
			for {
				p, err := r.ReplayAll(ctx, max, token)
				if err != nil {
					_ = out.Encode(p)
					return describe("replay --all", err)
				}
				fmt.Fprintf(os.Stderr, "replay --all: round %d: %d dead letters received, %d re-sent (%d orders), %d duplicates completed, %d unplaceable left; %d re-sent in all\n",
					p.Totals.Calls, p.Scanned, p.Replayed, p.Orders, p.Duplicates, p.Unplaceable, p.Totals.Replayed)
				switch {
				case p.Done:
					return out.Encode(p)
				case p.Incomplete != nil && p.Incomplete.LockedElsewhere() && waits < lockWaits:
					waits++
					fmt.Fprintf(os.Stderr, "replay --all: %s; waiting %s\n", p.Incomplete.Reason, lockWait)
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(lockWait):
					}
				case p.Incomplete != nil:
					_ = out.Encode(p)
					return fmt.Errorf("replay --all: incomplete: %s", p.Incomplete.Reason)
				default:
					waits = 0
				}
				token = p.Continuation
			}
		}, "")
}

// userCommand runs a command a user types: it parses the flags, reads the
// settings (environment, then --settings), builds the clients, and calls
// each with every argument, printing JSON results on stdout.
func userCommand(fs *flag.FlagSet, args []string, what string, needStorage func() bool,
	each func(ctx context.Context, cfg settings.Settings, c *clients, arg string, out *json.Encoder) error, parsed ...string) error {
	settingsFile := fs.Lookup("settings")
	if settingsFile == nil {
		fs.String("settings", "local.settings.json", "file whose Values fill in settings missing from the environment")
		settingsFile = fs.Lookup("settings")
	}
	if parsed == nil {
		if err := fs.Parse(args); err != nil {
			return err
		}
		parsed = fs.Args()
	}
	if len(parsed) == 0 {
		return fmt.Errorf("%s: name at least one %s", fs.Name(), what)
	}
	lookup, err := withSettingsFile(settingsFile.Value.String())
	if err != nil {
		return err
	}
	cfg, err := settings.LoadForClient(lookup, needStorage())
	if err != nil {
		return fmt.Errorf("invalid settings:\n%w", err)
	}
	c, err := newClients(cfg)
	if err != nil {
		return err
	}
	defer c.close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	out := json.NewEncoder(os.Stdout)
	for _, arg := range parsed {
		if err := each(ctx, cfg, c, arg, out); err != nil {
			return err
		}
	}
	return nil
}

// replayer replays dead letters with a fresh dead-letter source per run.
type replayer struct {
	c     *clients
	queue string
	opts  replay.Options
}

// newReplayer is the replayer of a user command: it reads the orders'
// appliedSeq (to complete duplicates without re-sending them) when
// StateStorage is set.
func newReplayer(cfg settings.Settings, c *clients) replayer {
	r := replayer{c: c, queue: cfg.OrdersQueue, opts: replay.Options{MaxScan: cfg.ReplayScanLimit}}
	if c.tables != nil {
		r.opts.Orders = c.orderStore(cfg.OrdersTable)
	}
	return r
}

// source opens a dead-letter source for one run; close releases it.
func (r replayer) source() (src replay.Source, sender queueSender, close func(), err error) {
	if sender, err = r.c.sender(r.queue); err != nil {
		return nil, nil, nil, err
	}
	if r.c.local != "" {
		return localbus.NewDeadLetters(r.c.local, r.queue), sender, func() {}, nil
	}
	dl, err := servicebus.NewDeadLetters(r.c.bus, r.queue)
	if err != nil {
		return nil, nil, nil, err
	}
	return dl, sender, func() { _ = dl.Close(context.Background()) }, nil
}

func (r replayer) Replay(ctx context.Context, orderID string) (replay.Report, error) {
	src, sender, close, err := r.source()
	if err != nil {
		return replay.Report{OrderID: orderID, Replayed: []replay.Replayed{}}, err
	}
	defer close()
	return replay.Order(ctx, src, sender, orderID, r.opts)
}

func (r replayer) ReplayAll(ctx context.Context, max int, continuation string) (replay.Progress, error) {
	src, sender, close, err := r.source()
	if err != nil {
		return replay.Progress{}, err
	}
	defer close()
	return replay.All(ctx, src, sender, replay.AllOptions{Options: r.opts, Max: max, Continuation: continuation})
}

// queueSender is what the program sends with: azservicebus in Azure, or the
// local development transport to convoy-devhost.
type queueSender interface {
	convoy.Sender
	SendLedger(ctx context.Context, ledgerID, stream string, doc []byte) error
	Close(ctx context.Context) error
}

var (
	_ queueSender = (*servicebus.Sender)(nil)
	_ queueSender = (*localbus.Sender)(nil)
)

// clients are built once per process and shared.
type clients struct {
	tables  *aztables.ServiceClient // nil when StateStorage is not needed
	batches *tablestore.Batches     // entity-group transactions on the same account
	bus     *azservicebus.Client    // nil with the local transport
	local   string                  // convoy-devhost's address with the local transport
	senders map[string]queueSender
}

func newClients(cfg settings.Settings) (*clients, error) {
	c := &clients{senders: map[string]queueSender{}, local: cfg.ServiceBus.Local}
	var err error
	if cfg.Storage != (settings.Connection{}) {
		if c.tables, c.batches, err = tableService(cfg.Storage); err != nil {
			return nil, fmt.Errorf("setting StateStorage: %w", err)
		}
	}
	if c.local != "" {
		return c, nil
	}
	if c.bus, err = serviceBus(cfg.ServiceBus); err != nil {
		return nil, fmt.Errorf("setting ServiceBusConnection: %w", err)
	}
	return c, nil
}

func (c *clients) sender(queue string) (queueSender, error) {
	if s, ok := c.senders[queue]; ok {
		return s, nil
	}
	var s queueSender
	if c.local != "" {
		s = localbus.NewSender(c.local, queue)
	} else {
		var err error
		if s, err = servicebus.NewSender(c.bus, queue); err != nil {
			return nil, err
		}
	}
	c.senders[queue] = s
	return s, nil
}

func (c *clients) publisher(cfg settings.Settings, progress func(sent, total int)) (*ledger.Publisher, error) {
	sender, err := c.sender(cfg.OrdersQueue)
	if err != nil {
		return nil, err
	}
	return ledger.NewPublisher(tablestore.NewLedgers(c.tables.NewClient(cfg.LedgersTable)), sender, ledger.PublisherOptions{
		Limits:          ledger.Limits{MaxTransactions: cfg.MaxTransactions, MaxMessageBytes: cfg.MaxMessageBytes},
		Retry:           fault.RetryPolicy{MaxElapsed: cfg.RetryBudget},
		BatchPerSession: cfg.QueuePartitioned,
		Progress:        progress,
	}), nil
}

func (c *clients) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range c.senders {
		_ = s.Close(ctx)
	}
	if c.bus != nil {
		_ = c.bus.Close(ctx)
	}
}

// credential follows the Functions host's convention for identity-based
// connections: a client id selects that user-assigned managed identity;
// otherwise DefaultAzureCredential (system identity in Azure, az login locally).
func credential(c settings.Connection) (azcore.TokenCredential, error) {
	if c.ClientID != "" || c.Credential == "managedidentity" {
		opts := &azidentity.ManagedIdentityCredentialOptions{}
		if c.ClientID != "" {
			opts.ID = azidentity.ClientID(c.ClientID)
		}
		return azidentity.NewManagedIdentityCredential(opts)
	}
	return azidentity.NewDefaultAzureCredential(nil)
}

func tableService(c settings.Connection) (*aztables.ServiceClient, *tablestore.Batches, error) {
	if !c.UsesIdentity() {
		svc, err := aztables.NewServiceClientFromConnectionString(c.ConnectionString, nil)
		if err != nil {
			return nil, nil, err
		}
		batches, err := tablestore.NewBatchesFromConnectionString(c.ConnectionString, nil)
		return svc, batches, err
	}
	cred, err := credential(c)
	if err != nil {
		return nil, nil, err
	}
	svc, err := aztables.NewServiceClient(c.Endpoint, cred, nil)
	return svc, tablestore.NewBatches(c.Endpoint, cred, nil), err
}

// orderStore is the processor's store on table.
func (c *clients) orderStore(table string) *tablestore.Store {
	return tablestore.New(c.tables.NewClient(table), c.batches.Table(table))
}

func serviceBus(c settings.Connection) (*azservicebus.Client, error) {
	if !c.UsesIdentity() {
		return azservicebus.NewClientFromConnectionString(c.ConnectionString, nil)
	}
	cred, err := credential(c)
	if err != nil {
		return nil, err
	}
	return azservicebus.NewClient(c.Endpoint, cred, nil)
}

// withSettingsFile looks settings up in the environment, then in the Values
// of a local.settings.json file (if it exists), as Core Tools would.
func withSettingsFile(path string) (func(string) (string, bool), error) {
	var file struct{ Values map[string]string }
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(data, &file); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		v, ok := file.Values[k]
		return v, ok
	}, nil
}

func readFile(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// progressPrinter reports progress on stderr about every second.
func progressPrinter(name string) func(sent, total int) {
	last := time.Now()
	return func(sent, total int) {
		if sent == total || time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "%s: %d/%d messages sent\n", name, sent, total)
		}
	}
}

// describe turns a command's error into a readable one: the problems of an
// invalid ledger one per line, the whole cause chain of anything else.
func describe(name string, err error) error {
	var b strings.Builder
	if fault.CodeOf(err) == fault.Invalid {
		fmt.Fprintf(&b, "%s: %s", name, fault.MessageOf(err))
	} else {
		fmt.Fprintf(&b, "%s: %v", name, err)
	}
	for _, p := range fault.ProblemsOf(err) {
		fmt.Fprintf(&b, "\n  transaction %d: %s %s", p.Index, p.Field, p.Reason)
	}
	return errors.New(b.String())
}
