package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// update rewrites the golden files instead of comparing with them:
//
//	go test . -run TestGolden -update
//
// Never part of make test: a golden is rewritten by hand, and its diff
// reviewed, only when a change of what the commands print is meant.
var update = flag.Bool("update", false, "rewrite testdata/golden/* from what the commands print today")

// wallClock matches the updatedAt the command's own processor stamps (it
// runs on the wall clock, as serve's does).
var wallClock = regexp.MustCompile(`"updatedAt":"[0-9T:-]+Z"`)

// TestGoldenCommandAnswers (issue 43's compatibility goldens, written on
// the code before the engine was taken apart from the order fold): what
// `convoy skip` prints on stdout, and its exit code, run in this process
// against Azurite: a skip that drains, the same skip again (skipped
// earlier), a seq that is not missing. `convoy replay` needs Service Bus:
// what it prints is its answer's body (operator.AnswerOf, Body) through
// the same encoder, pinned here for a complete and an incomplete replay.
// In testdata/golden/command-answers.json; only the skip's updatedAt (the
// wall clock) is normalised.
func TestGoldenCommandAnswers(t *testing.T) {
	ctx := context.Background()
	svc, err := aztables.NewServiceClientFromConnectionString(storage, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("golden%d", time.Now().UnixNano()%1e9)
	table := svc.NewClient(name)
	if _, err := table.CreateTable(ctx, nil); err != nil {
		t.Fatal(err)
	}
	batches, err := tablestore.NewBatchesFromConnectionString(storage, &azcore.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store := tablestore.New(table, batches.Table(name))
	clock := func() time.Time { return time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC) }
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Now: clock, Index: store})
	amount := int64(1250)
	for _, m := range []convoy.Message{
		{Seq: 1, MessageID: "L-1:0", Command: orders.Transaction{OrderID: "o-1", Op: orders.CreateOrder, Currency: "EUR", Data: json.RawMessage(`{"note":"<&>"}`)}},
		{Seq: 3, MessageID: "L-1:2", Command: orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: "t-1", Amount: &amount}},
	} {
		if _, err := p.Process(ctx, "o-1", []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("StateStorage", storage)
	t.Setenv("OrdersTableName", name)
	t.Setenv("ServiceBusConnection", "")
	settingsFile := filepath.Join(t.TempDir(), "none.json")

	type answer struct {
		Command string          `json:"command"`
		Exit    int             `json:"exit"`
		Stdout  json.RawMessage `json:"stdout"`
	}
	var answers []answer
	for _, args := range [][]string{{"skip", "--settings", settingsFile, "o-1", "2"}, {"skip", "--settings", settingsFile, "o-1", "2"}, {"skip", "--settings", settingsFile, "o-1", "1"}} {
		out, code := runCaptured(t, args...)
		out = wallClock.ReplaceAllString(out, `"updatedAt":"<now>"`)
		if out == "" {
			out = "null"
		}
		answers = append(answers, answer{Command: "convoy skip " + strings.Join(args[3:], " "), Exit: code, Stdout: json.RawMessage(out)})
	}
	// `convoy replay ORDERID`: out.Encode(a.Body(fault.MessageOf)).
	rep := replay.Report{OrderID: "o-1", Replayed: []replay.Replayed{{Seq: 2, MessageID: "L-1:1", NewMessageID: "L-1:1#replay-9", Reason: "MaxDeliveryCountExceeded"}}, Scanned: 2}
	busy := rep
	busy.Incomplete = &replay.Incomplete{ScanLimitReached: true, ScanLimit: 5000, Reason: "the scan limit was reached"}
	for _, r := range []replay.Report{rep, busy} {
		var b bytes.Buffer
		_ = json.NewEncoder(&b).Encode(operator.AnswerOf(r, r.Incomplete, nil).Body(fault.MessageOf))
		answers = append(answers, answer{Command: "convoy replay o-1 (its answer's body)", Stdout: json.RawMessage(b.Bytes())})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(answers); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "command-answers.json", b.Bytes())
}

// checkGolden compares got with testdata/golden/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		g, w := "", ""
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs from what the commands print today, first at line %d:\n got: %s\nwant: %s\n(issue 43: the answers must not change)", path, i+1, g, w)
		}
	}
}
