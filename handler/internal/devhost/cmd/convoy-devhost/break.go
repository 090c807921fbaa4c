package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// breakOrders creates, against the emulation running from app, one blocked
// order of each kind, as the end-to-end tests do (e2e_heal_test.go's
// poison, e2e_replay_test.go's failed deliveries), and one blocked account:
//
//   - practice-transient-<time>: its seq 2 is readable, but its deliveries
//     ran out (a receiver that holds the order's session abandons it
//     MaxDeliveryCount times, as a handler losing its locks in an outage
//     would), so Service Bus dead-letters it for MaxDeliveryCountExceeded;
//     then seq 1 is applied and seq 3 parks. A transient cause: AutoReplay
//     heals it at its next run (unless AutoReplayEnabled=false), or replay it.
//   - practice-poison-<time>: its seq 2 can never be read (its amount is
//     text); the handler refuses it until Service Bus dead-letters it, seq 3
//     parks. A permanent cause: replay leaves it; skip seq 2.
//   - practice-account-<time>: the same poison on the accounts queue (its
//     seq 2, a deposit, has a text amount): each domain has its own queue,
//     table and dead letters, and is healed the same way, with --domain
//     accounts (or under /api/accounts/).
func breakOrders(ctx context.Context, app string, port int) error {
	st, err := readState(app, port)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var sum struct {
		AutoReplay struct {
			Enabled bool `json:"enabled"`
		} `json:"autoReplay"`
	}
	if err := getJSON(ctx, st.URL+"/api/summary", &sum); err != nil {
		return fmt.Errorf("the emulation at %s does not answer (%v): is make devhost%s still running?", st.URL, err, portArg(port))
	}
	client, err := azservicebus.NewClientFromConnectionString(st.ServiceBusConnection, nil)
	if err != nil {
		return err
	}
	defer client.Close(context.Background())
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		return err
	}
	defer sender.Close(context.Background())

	accountQueue, err := client.NewSender("accounts", nil)
	if err != nil {
		return err
	}
	defer accountQueue.Close(context.Background())

	stamp := time.Now().UTC().Format("150405")
	transient, poison, account := "practice-transient-"+stamp, "practice-poison-"+stamp, "practice-account-"+stamp
	tx := func(order, op, extra string) string {
		return fmt.Sprintf(`{"transaction":{"orderId":%q,"op":%q%s}}`, order, op, extra)
	}
	create := func(order string) string { return tx(order, "CreateOrder", `,"currency":"EUR"`) }
	add := func(order, txID string, amount string) string {
		return tx(order, "AddTransaction", fmt.Sprintf(`,"txId":%q,"amount":%s`, txID, amount))
	}

	// The transient one: hold its session first, so that the host's
	// trigger cannot take seq 2, then spend its deliveries.
	fmt.Printf("breaking %s: its seq 2 is abandoned until Service Bus dead-letters it (MaxDeliveryCountExceeded)\n", transient)
	recv, err := client.AcceptSessionForQueue(ctx, "orders", transient, nil)
	if err != nil {
		return fmt.Errorf("hold the session of %s: %w", transient, err)
	}
	if err := send(ctx, sender, transient, 2, add(transient, "t-1", "1250")); err != nil {
		recv.Close(context.Background())
		return err
	}
	abandoned := 0
	for abandoned < 100 {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		msgs, err := recv.ReceiveMessages(rctx, 1, nil)
		rcancel()
		if len(msgs) == 0 {
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				recv.Close(context.Background())
				return fmt.Errorf("receive seq 2 of %s: %w", transient, err)
			}
			break // dead-lettered: nothing left in the session
		}
		if err := recv.AbandonMessage(ctx, msgs[0], nil); err != nil {
			recv.Close(context.Background())
			return fmt.Errorf("abandon seq 2 of %s: %w", transient, err)
		}
		abandoned++
	}
	recv.Close(context.Background())
	if abandoned == 0 {
		return fmt.Errorf("seq 2 of %s was never received: is the orders queue the emulation's?", transient)
	}
	if err := send(ctx, sender, transient, 1, create(transient)); err != nil {
		return err
	}
	if err := send(ctx, sender, transient, 3, add(transient, "t-2", "50")); err != nil {
		return err
	}

	fmt.Printf("breaking %s: its seq 2 cannot be read (amount \"a lot\"); the handler refuses it until it is dead-lettered\n", poison)
	for _, m := range []struct {
		seq  int64
		body string
	}{{1, create(poison)}, {2, add(poison, "t-1", `"a lot"`)}, {3, add(poison, "t-2", "50")}} {
		if err := send(ctx, sender, poison, m.seq, m.body); err != nil {
			return err
		}
	}

	fmt.Printf("breaking %s: its seq 2 cannot be read (amount \"a lot\"); the handler refuses it until it is dead-lettered\n", account)
	command := func(kind, fields string) string {
		return fmt.Sprintf(`{"command":{"accountId":%q,"kind":%q%s}}`, account, kind, fields)
	}
	for _, m := range []struct {
		seq  int64
		body string
	}{{1, command("open", `,"currency":"EUR"`)}, {2, command("deposit", `,"amount":"a lot","reference":"dep-1"`)},
		{3, command("deposit", `,"amount":50,"reference":"dep-2"`)}} {
		if err := send(ctx, accountQueue, account, m.seq, m.body); err != nil {
			return err
		}
	}

	// They are blocked once each is listed missing seq 2, and seq 2 of each
	// is in its queue's dead-letter queue (peeked here: the blocked list
	// says where a missing message is only once an AutoReplay run has
	// looked, and with AutoReplay on, that run replays the transient one).
	want := []practice{{"orders", "orderId", transient}, {"orders", "orderId", poison}, {"accounts", "accountId", account}}
	var broken []string
	for {
		broken, err = blockedWithDeadLetter(ctx, client, st.URL, want)
		if err == nil && len(broken) == len(want) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not all of %v were blocked with seq 2 dead-lettered in time (so far: %v, %v): see %s/api/orders?blocked=true and %[4]s/api/accounts?blocked=true",
				want, broken, err, st.URL)
		case <-time.After(500 * time.Millisecond):
		}
	}
	auto := "AutoReplay is on: it replays this order at its next run (within the schedule's interval, a minute by default), so be quick, or start make devhost with AutoReplayEnabled=false"
	if !sum.AutoReplay.Enabled {
		auto = "AutoReplay is off (AutoReplayEnabled=false): it stays blocked until you replay it"
	}
	fmt.Printf(`
Two orders and an account are blocked, each missing its seq 2 (seq 1 applied, seq 3 parked):
  see them:  %[1]s/api/orders?blocked=true   (or the dashboard: %[1]s/api/dashboard)
             %[1]s/api/accounts?blocked=true

  %[2]s: seq 2 dead-lettered for MaxDeliveryCountExceeded, readable: a transient cause.
    %[4]s.
    replay:  curl -X POST %[1]s/api/orders/%[2]s/replay
         or  convoy replay %[2]s        (with ServiceBusConnection and StateStorage from the banner)
    then:    curl %[1]s/api/orders/%[2]s    (appliedSeq 3, no longer blocked)

  %[3]s: seq 2 can never be read (its amount is text): a permanent cause.
    A replay leaves it dead-lettered and says why; skip it instead:
    skip:    curl -X POST '%[1]s/api/orders/%[3]s/skip?seq=2'
         or  convoy skip %[3]s 2        (with StateStorage from the banner)
    then:    curl %[1]s/api/orders/%[3]s    (seq 2 rejected "skipped by operator", seq 3 applied)

  %[5]s: the same on the accounts queue, its own queue, table and dead letters
    (the commands take --domain accounts; the routes are under /api/accounts/):
    skip:    curl -X POST '%[1]s/api/accounts/%[5]s/skip?seq=2'
         or  convoy skip --domain accounts %[5]s 2        (with StateStorage from the banner)
    then:    curl %[1]s/api/accounts/%[5]s    (seq 2 rejected "skipped by operator", seq 3 applied)

Keys are not checked by the emulation; in Azure add -H "x-functions-key: <admin key>" to replay and skip.
`, st.URL, transient, poison, auto, account)
	return nil
}

// practice is a key break blocks: its domain (Name), the name of its id in
// the domain's blocked list, its id.
type practice struct{ domain, idName, id string }

func (p practice) String() string { return p.domain + "/" + p.id }

// blockedWithDeadLetter lists the keys of want that are blocked missing
// their seq 2 with that seq in their queue's dead-letter queue (each
// domain's queue is named as the domain, as the emulation has them).
func blockedWithDeadLetter(ctx context.Context, client *azservicebus.Client, url string, want []practice) ([]string, error) {
	var out []string
	for _, p := range want {
		listed, err := blockedAt(ctx, url, p, 2)
		if err != nil {
			return out, err
		}
		dlq, err := client.NewReceiverForQueue(p.domain, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
		if err != nil {
			return out, err
		}
		dead, err := deadLettered(ctx, dlq, 2)
		dlq.Close(context.Background())
		if err != nil {
			return out, err
		}
		if listed[p.id] && dead[p.id] {
			out = append(out, p.String())
		}
	}
	return out, nil
}

// send sends one message of key as LedgerIngest would (MessageId
// <ledgerId>:<index>, application properties ledgerId and seq).
func send(ctx context.Context, s *azservicebus.Sender, key string, seq int64, body string) error {
	ledgerID := key // a ledger of its own per practice key
	id := fmt.Sprintf("%s:%d", ledgerID, seq-1)
	contentType := "application/json"
	err := s.SendMessage(ctx, &azservicebus.Message{MessageID: &id, SessionID: &key, ContentType: &contentType,
		ApplicationProperties: map[string]any{"ledgerId": ledgerID, "seq": seq}, Body: []byte(body)}, nil)
	if err != nil {
		return fmt.Errorf("send seq %d of %s: %w", seq, key, err)
	}
	return nil
}

// blockedAt lists the blocked keys of p's domain whose missing seq is seq.
func blockedAt(ctx context.Context, url string, p practice, seq int64) (map[string]bool, error) {
	var page map[string][]map[string]any // {"<domain>": [{"<idName>": …, "missingSeq": …}]}
	if err := getJSON(ctx, url+"/api/"+p.domain+"?blocked=true&pageSize=500", &page); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, k := range page[p.domain] {
		if id, _ := k[p.idName].(string); id != "" && k["missingSeq"] == float64(seq) {
			out[id] = true
		}
	}
	return out, nil
}

// deadLettered lists the keys with a dead letter of seq seq (a peek of
// the whole dead-letter queue, locking nothing).
func deadLettered(ctx context.Context, dlq *azservicebus.Receiver, seq int64) (map[string]bool, error) {
	out := map[string]bool{}
	var from int64
	for {
		msgs, err := dlq.PeekMessages(ctx, 250, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			return nil, fmt.Errorf("peek the dead-letter queue: %w", err)
		}
		if len(msgs) == 0 {
			return out, nil
		}
		for _, m := range msgs {
			if n, ok := m.ApplicationProperties["seq"].(int64); ok && n == seq && m.SessionID != nil {
				out[*m.SessionID] = true
			}
			from = max(from, *m.SequenceNumber+1)
		}
	}
}

func getJSON(ctx context.Context, url string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// readState reads the state file of the emulation running from app.
func readState(app string, port int) (state, error) {
	var st state
	path := filepath.Join(app, stateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("no emulation is running from %s (no %s): start make devhost%s in another terminal first", app, stateFile, portArg(port))
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", path, err)
	}
	if !strings.HasPrefix(st.URL, "http://") || st.ServiceBusConnection == "" {
		return st, fmt.Errorf("%s: no url or serviceBusConnection", path)
	}
	return st, nil
}

func portArg(port int) string {
	if port == 7071 {
		return ""
	}
	return fmt.Sprintf(" PORT=%d", port)
}
