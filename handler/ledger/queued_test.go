package ledger_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// TestDecideQueued: what `convoy publish` does with a valid ledger bound
// for the ledgers queue, for each record its id may have. (TestCommands in
// handler/internal/devhost runs the binary through the same cases against
// the emulation and Azurite.)
func TestDecideQueued(t *testing.T) {
	parse := func(doc string) *ledger.Ledger {
		l, err := ledger.Parse([]byte(doc), ledger.Limits{}, ledgertest.Orders)
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
		d, err := ledger.DecideQueued(l, c.rec, c.checked, c.checkErr, now)
		text := d.Note
		if c.outcome == "" {
			if err == nil {
				t.Errorf("%s: %+v, want it refused", c.name, d)
				continue
			}
			text = err.Error()
		} else if err != nil || d.Send != c.send || d.Outcome != c.outcome {
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
	want := fmt.Sprintf("PT%dM", ledger.QueueDuplicateWindow/time.Minute) // ISO 8601, as Bicep and the emulator's config write it
	bicep, err := os.ReadFile("../../infra/modules/servicebus.bicep")
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
	data, err := os.ReadFile("../../infra/local/servicebus-emulator-config.json")
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
