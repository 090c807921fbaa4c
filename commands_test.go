package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/settings"
)

// TestDecideQueued: what `convoy publish` does with a valid ledger bound
// for the ledgers queue, for each record its id may have. (TestCommands in
// handler/internal/devhost runs the binary through the same cases against
// the emulation and Azurite.)
func TestDecideQueued(t *testing.T) {
	parse := func(doc string) *ledger.Ledger {
		l, err := ledger.Parse([]byte(doc), ledger.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := parse(`{"ledgerId":"L-1","transactions":[{"orderId":"o-1","op":"CreateOrder","currency":"EUR"}]}`)
	other := parse(`{"ledgerId":"L-1","transactions":[{"orderId":"o-1","op":"CreateOrder","currency":"USD"}]}`)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rec := func(s ledger.Status, hash string, ago time.Duration) *ledger.Record {
		return &ledger.Record{ID: "L-1", Hash: hash, Status: s, Sent: 1, UpdatedAt: now.Add(-ago)}
	}
	const window = "duplicate-detection window (10 minutes"
	for _, c := range []struct {
		name     string
		rec      *ledger.Record
		checked  bool
		checkErr error
		send     bool
		outcome  string
		says     []string // in the note, or in the error when outcome is ""
	}{
		{name: "no StateStorage", send: true, outcome: "sent", says: []string{`not checked against earlier publishes (StateStorage is not set): the queue drops this copy if ledger "L-1" was sent in the last 10 minutes`}},
		{name: "records unreadable", checked: true, checkErr: errors.New("403 forbidden"), send: true, outcome: "sent", says: []string{"(403 forbidden)", "drops this copy"}},
		{name: "new", checked: true, send: true, outcome: "sent"},
		{name: "same, published", checked: true, rec: rec(ledger.StatusPublished, l.Hash, time.Hour), outcome: "already published",
			says: []string{"already published at 2026-05-01T11:00:00Z: not sent again"}},
		{name: "same, publishing", checked: true, rec: rec(ledger.StatusPublishing, l.Hash, time.Minute), send: true, outcome: "sent",
			says: []string{"being published (1 sent, the last at 2026-05-01T11:59:00Z)", "this copy resumes it", "last 10 minutes"}},
		{name: "other content, published", checked: true, rec: rec(ledger.StatusPublished, other.Hash, time.Hour),
			says: []string{`ledger "L-1" was already received with other content (recorded published at 2026-05-01T11:00:00Z): not sent`, window, "give the changed ledger a new ledgerId"}},
		{name: "other content, publishing", checked: true, rec: rec(ledger.StatusPublishing, other.Hash, time.Minute),
			says: []string{"already received with other content (recorded publishing", "new ledgerId"}},
		{name: "rejected within the window", checked: true, rec: rec(ledger.StatusRejected, other.Hash, 4*time.Minute),
			says: []string{`ledger "L-1" was rejected at 2026-05-01T11:56:00Z`, "not sent", "after 2026-05-01T12:06:00Z", "--direct"}},
		{name: "rejected before the window", checked: true, rec: rec(ledger.StatusRejected, other.Hash, 11*time.Minute), send: true, outcome: "sent",
			says: []string{"takes the place of the ledger rejected under this id at 2026-05-01T11:49:00Z"}},
	} {
		d, err := decideQueued(l, c.rec, c.checked, c.checkErr, now)
		text := d.note
		if c.outcome == "" {
			if err == nil {
				t.Errorf("%s: %+v, want it refused", c.name, d)
				continue
			}
			text = err.Error()
		} else if err != nil || d.send != c.send || d.outcome != c.outcome {
			t.Errorf("%s: %+v, %v; want send %v, outcome %q", c.name, d, err, c.send, c.outcome)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(text, s) {
				t.Errorf("%s: %q does not say %q", c.name, text, s)
			}
		}
		if c.says == nil && text != "" {
			t.Errorf("%s: a note %q where nothing needs saying", c.name, text)
		}
		if c.outcome != "" && (strings.Contains(text, "\n") || len(text) > 200) {
			t.Errorf("%s: the note is not one short line (%d characters): %q", c.name, len(text), text)
		}
	}
}

// TestLedgersDuplicateWindow: the window publish names is the ledgers
// queue's, as deployed and as emulated.
func TestLedgersDuplicateWindow(t *testing.T) {
	want := fmt.Sprintf("PT%dM", ledgersDuplicateWindow/time.Minute) // ISO 8601, as Bicep and the emulator's config write it
	bicep, err := os.ReadFile("infra/modules/servicebus.bicep")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)resource ledgersQueue .*?duplicateDetectionHistoryTimeWindow: '([^']+)'`).FindSubmatch(bicep)
	if m == nil {
		t.Error("infra/modules/servicebus.bicep: no duplicateDetectionHistoryTimeWindow on the ledgers queue")
	} else if string(m[1]) != want {
		t.Errorf("infra/modules/servicebus.bicep: the ledgers queue's window is %s, publish says %s", m[1], want)
	}
	var cfg struct {
		UserConfig struct {
			Namespaces []struct {
				Queues []struct {
					Name       string
					Properties struct{ DuplicateDetectionHistoryTimeWindow string }
				}
			}
		}
	}
	data, err := os.ReadFile("infra/local/servicebus-emulator-config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ns := range cfg.UserConfig.Namespaces {
		for _, q := range ns.Queues {
			if q.Name == "ledgers" {
				found = true
				if got := q.Properties.DuplicateDetectionHistoryTimeWindow; got != want {
					t.Errorf("servicebus-emulator-config.json: the ledgers queue's window is %q, publish says %s", got, want)
				}
			}
		}
	}
	if !found {
		t.Error("servicebus-emulator-config.json: no ledgers queue")
	}
}

// TestHelp: help, -h, -help and --help, for the program and for each
// command, print that help on stdout and exit 0 without starting anything,
// even with every setting serve needs present (the port it would listen on
// stays free); each command's help names the settings it reads.
func TestHelp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	t.Setenv("FUNCTIONS_CUSTOMHANDLER_PORT", strconv.Itoa(port))
	t.Setenv("ServiceBusConnection", "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;")
	t.Setenv("StateStorage", storage)
	settingsOf := map[string][]string{
		"":        {"publish", "replay", "skip", "local.settings.json"},
		"serve":   {"FUNCTIONS_CUSTOMHANDLER_PORT", "ServiceBusConnection", "ServiceBusConnection__fullyQualifiedNamespace", "StateStorage", "StateStorage__tableServiceUri", "AutoReplayEnabled"},
		"publish": {"ServiceBusConnection", "ServiceBusConnection__fullyQualifiedNamespace", "StateStorage", "StateStorage__tableServiceUri", "LedgersQueueName", "OrdersQueueName", "--direct", "--stream", "--settings"},
		"replay":  {"ServiceBusConnection", "StateStorage", "StateStorage is required", "OrdersQueueName", "OrdersTableName", "ReplayScanLimit", "--all", "--max", "--settings"},
		"skip":    {"StateStorage", "StateStorage__tableServiceUri", "OrdersTableName", "--settings"},
	}
	for _, c := range []struct {
		args  []string
		topic string
	}{
		{[]string{"-h"}, ""}, {[]string{"--help"}, ""}, {[]string{"-help"}, ""}, {[]string{"help"}, ""},
		{[]string{"help", "publish"}, "publish"}, {[]string{"publish", "-h"}, "publish"}, {[]string{"publish", "--stream", "s", "--help", "x.json"}, "publish"},
		{[]string{"replay", "--help"}, "replay"}, {[]string{"replay", "--all", "-h"}, "replay"}, {[]string{"help", "replay"}, "replay"},
		{[]string{"skip", "-h"}, "skip"}, {[]string{"skip", "o-1", "2", "--help"}, "skip"},
		{[]string{"serve", "-h"}, "serve"}, {[]string{"help", "serve"}, "serve"},
	} {
		out, code := runCaptured(t, c.args...)
		if code != 0 || !strings.HasPrefix(out, "usage: convoy") {
			t.Errorf("convoy %v: exit %d, output %q", c.args, code, out)
			continue
		}
		if c.topic != "" && !strings.Contains(firstLine(out), c.topic) {
			t.Errorf("convoy %v: %q is not the help of %s", c.args, firstLine(out), c.topic)
		}
		for _, s := range settingsOf[c.topic] {
			if !strings.Contains(out, s) {
				t.Errorf("convoy %v: the help does not name %s", c.args, s)
			}
		}
		if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			conn.Close()
			t.Fatalf("convoy %v: something listens on FUNCTIONS_CUSTOMHANDLER_PORT", c.args)
		}
	}
	// Help of nothing, and a wrong command line, are errors (exit 2), on stderr.
	for _, args := range [][]string{{"help", "nope"}, {"nope"}, {"replay"}, {"skip", "o-1"}, {"skip", "o-1", "x"}, {"skip", "bad id", "2"},
		{"replay", "--max", "3", "o-1"}, {"replay", "--all", "o-1"}, {"replay", "--nope"}, {"publish"}} {
		if out, code := runCaptured(t, args...); code != 2 || out != "" {
			t.Errorf("convoy %v: exit %d, stdout %q; want 2 and nothing on stdout", args, code, out)
		}
	}
}

// runCaptured runs the command line in this process, with its stdout
// captured; it fails the test when the command has not returned in 10 s
// (serve started).
func runCaptured(t *testing.T, args ...string) (string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout = w
	os.Stderr, _ = os.Open(os.DevNull)
	done := make(chan int, 1)
	go func() { done <- run(args) }()
	var code int
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		os.Stdout, os.Stderr = stdout, stderr
		t.Fatalf("convoy %v did not return: it started something", args)
	}
	os.Stdout, os.Stderr = stdout, stderr
	w.Close()
	out, _ := io.ReadAll(r)
	return string(out), code
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestAnswerBody: `convoy replay` prints the body ReplayOrder answers with,
// never the envelope of its headers: the report, with "error" beside it
// when the replay was incomplete or failed.
func TestAnswerBody(t *testing.T) {
	inc := handler.OrderReplay{Report: replay.Report{OrderID: "o-1", Replayed: []replay.Replayed{},
		Incomplete: &replay.Incomplete{NotReceived: 1, Reason: "1 locked by another reader"}}}
	for _, c := range []struct {
		rep  handler.OrderReplay
		err  error
		want []string
	}{
		{handler.OrderReplay{Report: replay.Report{OrderID: "o-1", Replayed: []replay.Replayed{}}}, nil, []string{`{"orderId":"o-1","replayed":[],"scanned":0}`}},
		{inc, nil, []string{`"error":"1 locked by another reader"`, `"incomplete":{`, `"orderId":"o-1"`}},
		{handler.OrderReplay{Report: replay.Report{OrderID: "o-1", Replayed: []replay.Replayed{}}}, fault.Errorf(fault.Unavailable, "Service Bus is down"),
			[]string{`"error":"Service Bus is down"`, `"orderId":"o-1"`}},
	} {
		status, _ := handler.ReplayAnswer(c.rep, c.err)
		raw, _ := json.Marshal(answerBody(c.rep, status, c.err))
		for _, w := range c.want {
			if !strings.Contains(string(raw), w) || strings.Contains(string(raw), `"Body"`) {
				t.Errorf("status %d: %s, want %s and no envelope", status, raw, w)
			}
		}
	}
}

// TestSayWhileWaiting: a command that waits past waitNotice says what it
// waits for; one that is done before says nothing.
func TestSayWhileWaiting(t *testing.T) {
	defer func(d time.Duration) { waitNotice = d }(waitNotice)
	waitNotice = 20 * time.Millisecond
	var quick strings.Builder
	sayWhileWaitingTo(&quick, "quick")()
	var slow syncBuffer
	done := sayWhileWaitingTo(&slow, "o-1: reading the dead letters of queue orders")
	deadline := time.Now().Add(10 * time.Second)
	for slow.String() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	done()
	if quick.String() != "" || !strings.HasPrefix(slow.String(), "o-1: reading the dead letters of queue orders … (waiting") {
		t.Fatalf("done at once said %q; waiting said %q", quick.String(), slow.String())
	}
}

// TestHelpDefaultsAreTheLoadersOwn: every "Setting (value)" the help gives as a
// default is what the settings loader uses when the setting is absent.
func TestHelpDefaultsAreTheLoadersOwn(t *testing.T) {
	cfg, err := settings.LoadForClient(func(k string) (string, bool) {
		if k == "ServiceBusConnection" {
			return "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;", true
		}
		return "", false
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]string{
		"OrdersQueueName": cfg.OrdersQueue, "LedgersQueueName": cfg.LedgersQueue,
		"OrdersTableName": cfg.OrdersTable, "LedgersTableName": cfg.LedgersTable,
		"ReplayScanLimit": strconv.Itoa(cfg.ReplayScanLimit), "TransientRetrySeconds": strconv.Itoa(int(cfg.RetryBudget / time.Second)),
	}
	given := regexp.MustCompile(`([A-Z][A-Za-z]+) \(([^) ]+)\)`)
	checked := 0
	for topic, text := range helps {
		for _, m := range given.FindAllStringSubmatch(text, -1) {
			want, known := loaded[m[1]]
			if !known {
				continue
			}
			checked++
			if m[2] != want {
				t.Errorf("help %q gives %s (%s); the loader's default is %s", topic, m[1], m[2], want)
			}
		}
	}
	if checked < 6 {
		t.Fatalf("only %d defaults found in the help", checked)
	}
}
