package devhost_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Replay against the emulation's dead-letter queue, which locks and limits
// like Service Bus's (devbus.Queue.ReceiveDeadLetters).

// postH posts to a function and returns the status, the JSON body and the headers.
func (e *env) postH(t *testing.T, path string) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.Post(e.host.URL()+path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: not JSON: %v", path, err)
	}
	return resp.StatusCode, out, resp.Header
}

// failSeqs makes every OrderProcessor invocation holding a message whose seq
// satisfies bad fail, so that those messages are dead-lettered.
func (e *env) failSeqs(bad func(m *devbus.Message, seq int64) bool) {
	e.host.InjectFault(func(fn string, msgs []*devbus.Message) error {
		if fn != "OrderProcessor" {
			return nil
		}
		for _, m := range msgs {
			if seq, _ := convoy.IntProperty(m.Properties[convoy.PropSeq]); bad(m, seq) {
				return fmt.Errorf("injected: a dependency is down for %s", m.MessageID)
			}
		}
		return nil
	})
}

// replayAll calls ReplayDeadLetters with its continuation until done,
// retrying a 503 (locked elsewhere) after a pause; it returns the last answer.
func (e *env) replayAll(t *testing.T, max int) map[string]any {
	t.Helper()
	token := ""
	for range 200 {
		q := url.Values{"max": {fmt.Sprint(max)}}
		if token != "" {
			q.Set("continuation", token)
		}
		code, out, _ := e.postH(t, "/api/deadletters/replay?"+q.Encode())
		switch {
		case code == 200 && out["done"] == true:
			return out
		case code == 200 || code == 503:
			token, _ = out["continuation"].(string)
			if token == "" {
				t.Fatalf("replay of all dead letters: %d %v, without a continuation", code, out)
			}
			if code == 503 {
				time.Sleep(100 * time.Millisecond)
			}
		default:
			t.Fatalf("replay of all dead letters: %d %v", code, out)
		}
	}
	t.Fatal("replay of all dead letters never ends")
	return nil
}

// unlocked asserts that no dead letter is left locked: a receive gets them all.
func unlocked(t *testing.T, q *devbus.Queue) {
	t.Helper()
	all := len(q.DeadLetters())
	got := q.ReceiveDeadLetters(all + 1)
	for _, m := range got {
		if err := q.AbandonDeadLetter(m.SequenceNumber, m.LockToken); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != all {
		t.Fatalf("%d of %d dead letters are still locked after the replay", all-len(got), all)
	}
}

// TestReplayScanLimitE2E: more dead letters than one scan receives
// (ReplayScanLimit 3, five dead letters). The order whose dead letter lies
// beyond the limit gets a 409 that says so, not "nothing to replay", and no
// dead letter stays locked; the replay of every dead letter, two per call,
// then restores every order to its fold.
func TestReplayScanLimitE2E(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) { o.Settings["ReplayScanLimit"] = "3" })
	e.failSeqs(func(_ *devbus.Message, seq int64) bool { return seq == 2 })
	ledgers := e.publish(ctx, workload(21, "scan", 1, 40, 5)...)
	e.waitIdle(ctx)
	q := e.host.Queue("orders")
	dead := q.DeadLetters()
	if len(dead) != 5 {
		t.Fatalf("%d dead letters, want one per order", len(dead))
	}
	e.host.InjectFault(nil)
	last := dead[len(dead)-1].SessionID // beyond the first three
	code, rep, _ := e.postH(t, "/api/orders/"+last+"/replay")
	inc, _ := rep["incomplete"].(map[string]any)
	if code != 409 || rep["error"] == nil || inc == nil || inc["scanLimitReached"] != true || inc["notReceived"] != 1.0 || len(rep["replayed"].([]any)) != 0 {
		t.Fatalf("replay of %s, whose dead letter lies past the scan limit: %d %v", last, code, rep)
	}
	unlocked(t, q)
	first := dead[0].SessionID
	if code, rep, _ := e.postH(t, "/api/orders/"+first+"/replay"); code != 200 || len(rep["replayed"].([]any)) != 1 {
		t.Fatalf("replay of %s, within the scan limit: %d %v", first, code, rep)
	}
	if code, out, _ := e.postH(t, "/api/deadletters/replay?max=4"); code != 400 || out["error"] == nil {
		t.Fatalf("max above the scan limit: %d %v, want 400", code, out)
	}
	out := e.replayAll(t, 2)
	if tot := out["totals"].(map[string]any); tot["replayed"] != 4.0 || tot["calls"].(float64) < 2 {
		t.Fatalf("replay of all dead letters: %v, want 4 replayed over at least 2 calls", out)
	}
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
}

// TestTwoReplaysAtOnce: while another reader (another replay) holds the
// dead letters locked, a replay of an order and a replay of everything
// answer 503 with Retry-After and say how many they could not receive,
// instead of "nothing to replay". Released, two replays run at once and
// every order ends in its fold.
func TestTwoReplaysAtOnce(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	e.failSeqs(func(_ *devbus.Message, seq int64) bool { return seq == 3 || seq == 4 })
	ledgers := e.publish(ctx, workload(23, "twice", 1, 40, 2)...)
	e.waitIdle(ctx)
	e.host.InjectFault(nil)
	q := e.host.Queue("orders")
	if n := len(q.DeadLetters()); n != 4 {
		t.Fatalf("%d dead letters, want 4", n)
	}
	held := q.ReceiveDeadLetters(100)
	for _, path := range []string{"/api/orders/twice-00/replay", "/api/deadletters/replay"} {
		code, out, h := e.postH(t, path)
		inc, _ := out["incomplete"].(map[string]any)
		if code != 503 || h.Get("Retry-After") == "" || out["error"] == nil || inc == nil || inc["notReceived"].(float64) < 2 {
			t.Fatalf("%s while another reader holds the dead letters: %d %v (Retry-After %q)", path, code, out, h.Get("Retry-After"))
		}
	}
	for _, m := range held {
		if err := q.AbandonDeadLetter(m.SequenceNumber, m.LockToken); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var replayed atomic.Int64
	for _, id := range []string{"twice-00", "twice-01"} {
		wg.Go(func() {
			for range 100 {
				code, out, _ := e.postH(t, "/api/orders/"+id+"/replay")
				// What a run re-sent is in its report, whatever the status:
				// a 503 (the rest locked by the other run) may carry some.
				if r, ok := out["replayed"].([]any); ok {
					replayed.Add(int64(len(r)))
				}
				if code == 200 {
					if out["incomplete"] == nil {
						return
					}
					// Some of the order's dead letters are still locked: the
					// other run's receiver took them as they were released,
					// and holds them until its locks expire, as Service Bus
					// does. Run again, as the answer says.
					continue
				}
				if code != 503 {
					t.Errorf("replay of %s: %d %v", id, code, out)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Errorf("replay of %s never completes", id)
		})
	}
	wg.Wait()
	if replayed.Load() != 4 {
		t.Fatalf("%d replayed in all, want 4", replayed.Load())
	}
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
}

// TestReplayAllAfterOutage: a dependency is down for a while and a third of
// the messages of many orders are dead-lettered, every order blocked. One of
// them reaches its order meanwhile by another way (its dead letter becomes a
// duplicate). The replay of every dead letter, a few per call, completes
// the duplicate without re-sending it, replays the rest and every order ends
// in the state of its independent fold.
func TestReplayAllAfterOutage(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 3*time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	e.failSeqs(func(_ *devbus.Message, seq int64) bool { return seq%3 == 2 })
	ledgers := e.publish(ctx, workload(25, "outage", 2, 90, 8)...)
	e.waitIdle(ctx)
	e.host.InjectFault(nil)
	q := e.host.Queue("orders")
	dead := q.DeadLetters()
	if blocked := e.blocked(t); len(dead) < 20 || len(blocked) != 8 {
		t.Fatalf("%d dead letters, %d orders blocked; want many, all 8", len(dead), len(blocked))
	}
	// The first dead letter reaches its order under another MessageId.
	d := dead[0]
	q.Send([]devbus.Message{{MessageID: "resent-" + d.MessageID, SessionID: d.SessionID, ContentType: d.ContentType, Properties: d.Properties, Body: d.Body}})
	e.waitIdle(ctx)
	out := e.replayAll(t, 7)
	tot := out["totals"].(map[string]any)
	if tot["duplicates"] != 1.0 || tot["replayed"] != float64(len(dead)-1) || tot["calls"].(float64) < 3 {
		t.Fatalf("replay of all %d dead letters: %v, want 1 duplicate, %d replayed over several calls", len(dead), out, len(dead)-1)
	}
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
	if blocked := e.blocked(t); len(blocked) != 0 {
		t.Fatalf("still blocked: %v", blocked)
	}
}

// TestReplayOfReplayMessageID: a message with the longest ledger id fails
// again after each replay, three times: every replayed copy's MessageId
// keeps the original's root and stays within Service Bus's 128 characters
// (the emulation refuses longer ones, as Service Bus does).
//
// The injected failure dead-letters a replayed copy at once. A replay's
// receiving link closes when its scan ends, before its re-sends, so the new
// dead letter cannot come into it and stay locked there (Service Bus keeps
// the locks of a closed receiver's unsettled messages); should the next
// replay still answer 503 "locked by another reader", the operator runs it
// again: so does the test, on a lock duration of 15 s (longer than a
// replay's scan, which ends with a 5 s wait for more).
func TestReplayOfReplayMessageID(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		p := o.Queues["orders"]
		p.LockDuration = 15 * time.Second
		o.Queues["orders"] = p
	})
	id := "L-" + strings.Repeat("r", 98)
	doc := []byte(`{"ledgerId": "` + id + `", "transactions": [
		{"orderId": "again", "op": "CreateOrder", "currency": "EUR"},
		{"orderId": "again", "op": "AddTransaction", "txId": "t-1", "amount": 100},
		{"orderId": "again", "op": "AddTransaction", "txId": "t-2", "amount": 20},
		{"orderId": "again", "op": "ModifyTransaction", "txId": "t-1", "amount": 50},
		{"orderId": "again", "op": "AddTransaction", "txId": "t-3", "amount": 3, "last": true}]}`)
	l, err := ledger.Parse(doc, ledger.Limits{}, ledgertest.Orders)
	if err != nil {
		t.Fatal(err)
	}
	var rounds atomic.Int64
	e.failSeqs(func(_ *devbus.Message, seq int64) bool { return seq == 3 && rounds.Load() < 3 })
	e.publish(ctx, doc)
	for round := range 4 {
		e.waitIdle(ctx)
		if round == 3 {
			break
		}
		dead := e.host.Queue("orders").DeadLetters()
		if len(dead) != 1 {
			t.Fatalf("round %d: %d dead letters, want 1", round, len(dead))
		}
		rounds.Add(1)
		code, rep, _ := e.postH(t, "/api/orders/again/replay")
		for try := 0; code == 503 && try < 80; try++ {
			time.Sleep(250 * time.Millisecond)
			code, rep, _ = e.postH(t, "/api/orders/again/replay")
		}
		replayed, _ := rep["replayed"].([]any)
		if code != 200 || len(replayed) != 1 {
			t.Fatalf("replay %d (of %s): %d %v", round+1, dead[0].MessageID, code, rep)
		}
		newID := replayed[0].(map[string]any)["newMessageId"].(string)
		if len(newID) > 128 || !strings.HasPrefix(newID, convoy.MessageID(id, 2)+"#replay-") {
			t.Fatalf("replay %d: MessageId %q (%d characters)", round+1, newID, len(newID))
		}
	}
	e.checkFold(ctx, []*ledger.Ledger{l})
}
