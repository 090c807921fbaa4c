package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/settings"
	"github.com/convoy-dev/convoy/handler/tracing"
)

func publish(args []string) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	direct := fs.Bool("direct", false, "de-batch the ledger here, onto the orders queue (needs StateStorage), instead of sending it to the ledgers queue")
	stream := fs.String("stream", "", "the ledger's stream (its SessionId on the ledgers queue), replacing the document's own; default: the document's, else \"default\"")
	return userCommand(fs, args, "ledger file (or - for stdin)", false, func() string {
		if *direct {
			return "publish --direct allocates seqs and checkpoints in the ledgers table"
		}
		return ""
	},
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
				// A trace of its own, as an upload without a traceparent
				// starts one: every message sent carries its context.
				ctx, span := ledger.StartPublish(ctx, trace.SpanContext{}, "")
				sum, err := pub.Publish(ctx, doc)
				ledger.EndPublish(span, sum, err)
				if err != nil {
					return describe(name, err)
				}
				return out.Encode(ledger.Published{Summary: sum, TraceID: ledger.TraceIDOf(ctx)})
			}
			// Validate here too: an invalid ledger is better refused now than recorded as rejected later.
			l, err := ledger.Parse(doc, ledger.Limits{MaxTransactions: cfg.MaxTransactions}, ledgerDomains(cfg))
			if err != nil {
				return describe(name, err)
			}
			// The queue drops a MessageId (the ledgerId) it saw within its
			// duplicate-detection window, and says nothing: look at what
			// was recorded of this id first, when the record can be read.
			rec, checkErr := c.ledgerRecord(ctx, cfg, l.ID)
			if checkErr != nil {
				fmt.Fprintf(os.Stderr, "%s: warning: could not check ledger %s against the ledger records: %v\n", name, keyed.Quote(l.ID), checkErr)
			}
			d, err := ledger.DecideQueued(l, rec, c.tables != nil, checkErr, time.Now())
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			defaults, others := l.KeyCounts()
			answer := map[string]any{"ledgerId": l.ID, "stream": l.Stream, "queue": cfg.LedgersQueue, "transactions": l.Len(),
				"orders": defaults, "bytes": len(doc), "outcome": d.Outcome}
			if others != nil {
				answer["keys"] = others
			}
			if d.Note != "" {
				answer["note"] = d.Note
			}
			if d.Send {
				sender, err := c.sender(cfg.LedgersQueue)
				if err != nil {
					return err
				}
				// The ledger's trace starts here: the message carries it,
				// and LedgerIngest's publish span continues it.
				ctx, span := tracing.Start(ctx, "send ledger", trace.SpanContext{}, trace.WithSpanKind(trace.SpanKindProducer),
					trace.WithAttributes(attribute.String("messaging.system", "servicebus"), attribute.String("messaging.operation.type", "send"),
						attribute.String("messaging.destination.name", cfg.LedgersQueue), attribute.String("messaging.message.id", l.ID),
						attribute.String("convoy.ledger_id", l.ID)))
				err = sender.SendLedger(ctx, l.ID, l.Stream, doc)
				if err != nil {
					span.SetStatus(codes.Error, fault.MessageOf(err))
				}
				span.End()
				if err != nil {
					return describe(name, err)
				}
				answer["traceId"] = ledger.TraceIDOf(ctx)
			}
			return out.Encode(answer)
		})
}

func replayOrders(args []string) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	all := fs.Bool("all", false, "replay every placeable dead letter of the domain's queue instead of named keys")
	max := fs.Int("max", replay.DefaultAllMax, "with --all: dead letters received per round (at most ReplayScanLimit)")
	domain := domainFlag(fs)
	fs.String("settings", "local.settings.json", "file whose Values fill in settings missing from the environment")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkDomain("replay", *domain); err != nil {
		return err
	}
	if *all {
		if fs.NArg() > 0 {
			return usageErrorf("replay", "replay --all takes no order ids (got %q)", fs.Args())
		}
		if *max < 1 {
			return usageErrorf("replay", "--max %d: dead letters per round must be at least 1", *max)
		}
		return replayAll(fs, *domain, *max)
	}
	maxSet := false
	fs.Visit(func(f *flag.Flag) { maxSet = maxSet || f.Name == "max" })
	if maxSet {
		return usageErrorf("replay", "--max goes with --all")
	}
	if fs.NArg() == 0 {
		return usageErrorf("replay", "name at least one order id, or --all")
	}
	for _, id := range fs.Args() {
		if err := checkKey("replay", registered(*domain), id); err != nil {
			return err
		}
	}
	return userCommand(fs, nil, "id", false, func() string { return replayNeedsStorage },
		func(ctx context.Context, cfg settings.Settings, c *clients, id string, out *json.Encoder) error {
			d := domainOf(cfg, *domain)
			r, err := operatorReplayer(d, cfg, c)
			if err != nil {
				return err
			}
			// The HTTP function's code and answer (operator.ReplayOrder,
			// AnswerOf): the body printed is the one it would answer.
			done := sayWhileWaiting(fmt.Sprintf("%s: reading the dead letters of queue %s", id, d.Queue))
			rep, err := operator.ReplayOrder(ctx, d.Rules, r, id)
			done()
			a := operator.AnswerOf(rep, rep.Incomplete, err)
			_ = out.Encode(a.Body(fault.MessageOf))
			if len(rep.Left) > 0 {
				fmt.Fprintf(os.Stderr, "%s: %d dead letter(s) left dead-lettered (a permanent cause: re-sent, they would be dead-lettered again):\n", id, len(rep.Left))
				for _, l := range rep.Left {
					fmt.Fprintf(os.Stderr, "  %s (seq %d): %s\n", l.MessageID, l.Seq, l.Why)
				}
				fmt.Fprintf(os.Stderr, "  skip the %s's missing seq instead: convoy skip%s %s <missing seq> (GET /api/%s?blocked=true names it)\n",
					d.Rules.Noun(), domainArg(d), id, d.Name())
			}
			switch a.Outcome {
			case operator.Failed:
				return describe(id, err)
			case operator.LockedElsewhere, operator.ScanLimitReached:
				return fmt.Errorf("%s: %s: %s", id, incompleteAs[a.Outcome], a.Reason)
			}
			return nil
		}, fs.Args()...)
}

// incompleteAs is how `convoy replay` names an incomplete replay: as the
// HTTP function answers it (docs/operations.md), in the words its users
// know, which the output has always used.
var incompleteAs = map[operator.Outcome]string{
	operator.LockedElsewhere:  "incomplete (as HTTP 503)",
	operator.ScanLimitReached: "incomplete (as HTTP 409)",
}

// replayNeedsStorage is why a replay refuses to run without StateStorage.
const replayNeedsStorage = "a replay reads each order's appliedSeq there, so that a dead letter already applied or skipped is completed, not re-sent"

// skipGap is `convoy skip ORDERID SEQ`: SkipGap's code (operator.SkipGap) on
// the processor serve builds, against the orders table. It needs
// StateStorage only.
func skipGap(args []string) error {
	fs := flag.NewFlagSet("skip", flag.ContinueOnError)
	domain := domainFlag(fs)
	settingsFile := fs.String("settings", "local.settings.json", "file whose Values fill in settings missing from the environment")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkDomain("skip", *domain); err != nil {
		return err
	}
	noun := registered(*domain).Noun()
	if fs.NArg() != 2 {
		return usageErrorf("skip", "skip takes an %s id and a seq (got %d argument(s))", noun, fs.NArg())
	}
	id, seq := fs.Arg(0), fs.Arg(1)
	if err := checkKey("skip", registered(*domain), id); err != nil {
		return err
	}
	if n, err := strconv.ParseInt(seq, 10, 64); err != nil || n < 1 {
		return usageErrorf("skip", "seq %q is not an integer ≥ 1: name the %s's missing seq", seq, noun)
	}
	lookup, err := withSettingsFile(*settingsFile)
	if err != nil {
		return err
	}
	cfg, err := settings.LoadForClient(withoutServiceBus(lookup), true)
	if err != nil {
		return fmt.Errorf("invalid settings:\n%w", err)
	}
	c, err := newClients(cfg) // its Service Bus client is never used: it dials nothing
	if err != nil {
		return err
	}
	defer c.close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	d := domainOf(cfg, *domain)
	res, err := operator.SkipGap(ctx, d.Rules, operatorProcessor(d, cfg, c), id, seq)
	if err != nil {
		return describe(id, err)
	}
	// With Service Bus set, the skipped seq's dead letter is completed too,
	// as the HTTP skip does (it would keep alerting as a permanent cause).
	if hasServiceBus(lookup) {
		if r, err := operatorReplayer(d, cfg, c); err == nil {
			done := sayWhileWaiting(fmt.Sprintf("%s: seq %d skipped; looking for its dead letter in queue %s to complete it", id, res.Skipped, d.Queue))
			operator.SettleSkipped(ctx, r, &res)
			done()
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// waitNotice is how long a command waits on a service in silence before it
// says what it waits for (a variable for tests).
var waitNotice = time.Second

// sayWhileWaiting prints what on stderr if the wait it starts outlasts
// waitNotice, and again every few seconds; done ends it.
func sayWhileWaiting(what string) (done func()) { return sayWhileWaitingTo(os.Stderr, what) }

func sayWhileWaitingTo(w io.Writer, what string) (done func()) {
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		began := time.Now()
		t := time.NewTimer(waitNotice)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Fprintf(w, "%s … (waiting %.0f s)\n", what, time.Since(began).Seconds())
				t.Reset(5 * time.Second)
			}
		}
	}()
	return func() { close(stop); <-finished }
}

// hasServiceBus reports whether lookup names a Service Bus namespace.
func hasServiceBus(lookup func(string) (string, bool)) bool {
	for _, k := range []string{"ServiceBusConnection", "ServiceBusConnection__fullyQualifiedNamespace"} {
		if v, ok := lookup(k); ok && v != "" {
			return true
		}
	}
	return false
}

// withoutServiceBus: skip needs no Service Bus, but the settings loader (and
// newClients) want a connection; a syntactically valid one, never dialled
// (an azservicebus client connects on its first send or receive), stands in
// when none is set.
func withoutServiceBus(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if k == "ServiceBusConnection" {
			if v, ok := lookup(k); ok && v != "" {
				return v, ok
			}
			if v, ok := lookup(k + "__fullyQualifiedNamespace"); ok && v != "" {
				return "", false
			}
			return "Endpoint=sb://unused.invalid/;SharedAccessKeyName=unused;SharedAccessKey=unused", true
		}
		return lookup(k)
	}
}

// replayAll runs replay.All round after round until done, with a progress
// line per round on stderr and the last round's JSON on stdout. Dead letters
// locked by another reader are waited for (a lock lasts the queue's lock
// duration) up to lockWaits times in a row.
func replayAll(fs *flag.FlagSet, domain string, max int) error {
	const lockWaits, lockWait = 12, 10 * time.Second
	return userCommand(fs, nil, "", false, func() string { return replayNeedsStorage },
		func(ctx context.Context, cfg settings.Settings, c *clients, _ string, out *json.Encoder) error {
			r := allReplayer(domainOf(cfg, domain), cfg, c)
			token, waits := "", 0
			for {
				p, err := r.ReplayAll(ctx, max, token)
				a := operator.AnswerOf(p, p.Incomplete, err)
				if a.Outcome == operator.Failed {
					_ = out.Encode(p)
					return describe("replay --all", err)
				}
				fmt.Fprintf(os.Stderr, "replay --all: round %d: %d dead letters received, %d re-sent (%d orders), %d duplicates completed, %d unplaceable left; %d re-sent in all\n",
					p.Totals.Calls, p.Scanned, p.Replayed, p.Orders, p.Duplicates, p.Unplaceable, p.Totals.Replayed)
				switch {
				case p.Done:
					return out.Encode(p)
				case a.Outcome == operator.LockedElsewhere && waits < lockWaits:
					waits++
					fmt.Fprintf(os.Stderr, "replay --all: %s; waiting %s\n", a.Reason, lockWait)
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(lockWait):
					}
				case a.Outcome != operator.Complete:
					_ = out.Encode(p)
					return fmt.Errorf("replay --all: incomplete: %s", a.Reason)
				default:
					waits = 0
				}
				token = p.Continuation
			}
		}, "")
}

// userCommand runs a command a user types: it parses the flags, reads the
// settings (environment, then --settings), builds the clients, and calls
// each with every argument, printing JSON results on stdout. A command
// that reads its tables only (tablesOnly) needs no Service Bus setting.
func userCommand(fs *flag.FlagSet, args []string, what string, tablesOnly bool, needStorage func() string,
	each func(ctx context.Context, cfg settings.Settings, c *clients, arg string, out *json.Encoder) error, parsed ...string) error {
	settingsFile := fs.Lookup("settings")
	if settingsFile == nil {
		fs.String("settings", "local.settings.json", "file whose Values fill in settings missing from the environment")
		settingsFile = fs.Lookup("settings")
	}
	if parsed == nil {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		parsed = fs.Args()
	}
	if len(parsed) == 0 {
		return usageErrorf(fs.Name(), "name at least one %s", what)
	}
	lookup, err := withSettingsFile(settingsFile.Value.String())
	if err != nil {
		return err
	}
	if tablesOnly {
		lookup = withoutServiceBus(lookup)
	}
	why := needStorage()
	cfg, err := settings.LoadForClient(lookup, why != "")
	if err != nil {
		if why != "" {
			return fmt.Errorf("invalid settings (StateStorage is required: %s):\n%w", why, err)
		}
		return fmt.Errorf("invalid settings:\n%w", err)
	}
	// Spans go where the handler's do, flushed before the command exits.
	_, flushTracing, err := startTracing(func(err error) { fmt.Fprintf(os.Stderr, "convoy: spans not exported: %v\n", err) })
	if err != nil {
		return err
	}
	defer flushTracing()
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
