package devhost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// TestAccountCommands runs `convoy blocked`, `convoy status` and `convoy
// skip` with --domain accounts (the binary, as an operator would) against
// the emulation and Azurite. An account's seq 2 is a poison message (its
// amount is text): it is dead-lettered and the account waits behind it.
// The oracles are the commands sent here (seq 2 is the one missing; the
// balance is the deposits that apply, summed here) and the account as the
// handler answers it over HTTP; the commands of the order domain do not see
// the account, and an unknown --domain is refused before anything is read.
func TestAccountCommands(t *testing.T) {
	t.Parallel()
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		o.Settings["AutoReplayEnabled"] = "false"
		o.Settings["TransientRetrySeconds"] = "1"
		p := o.Queues["accounts"]
		p.MaxDeliveryCount = 2
		o.Queues["accounts"] = p
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	storage := "StateStorage=" + e.storage.ConnectionString()
	convoyCmd := func(args ...string) (string, string, int) {
		t.Helper()
		return runConvoy(ctx, t, []string{storage}, args...)
	}
	const id = "acc-ops"
	e.send(ctx, "accounts",
		rawOrderMessage("A:0", id, "A", 1, `{"command":{"accountId":"acc-ops","kind":"open","currency":"EUR"}}`),
		rawOrderMessage("A:1", id, "A", 2, `{"command":{"accountId":"acc-ops","kind":"deposit","amount":"a lot","reference":"d-1"}}`),
		rawOrderMessage("A:2", id, "A", 3, `{"command":{"accountId":"acc-ops","kind":"deposit","amount":250,"reference":"d-2"}}`),
		rawOrderMessage("A:3", id, "A", 4, `{"command":{"accountId":"acc-ops","kind":"withdraw","amount":100,"reference":"w-1"}}`))
	for len(e.host.Queue("accounts").DeadLetters()) == 0 {
		if ctx.Err() != nil {
			t.Fatal("the poison message was never dead-lettered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := e.host.WaitIdle(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	// blocked: the account, waiting for seq 2 with two behind it; the
	// orders' list does not have it.
	out, stderr, code := convoyCmd("blocked", "--domain", "accounts")
	var listed struct {
		Accounts []struct {
			AccountID  string `json:"accountId"`
			MissingSeq int64  `json:"missingSeq"`
			Parked     int    `json:"parked"`
		} `json:"accounts"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil || code != 0 || len(listed.Accounts) != 1 ||
		listed.Accounts[0].AccountID != id || listed.Accounts[0].MissingSeq != 2 || listed.Accounts[0].Parked != 2 {
		t.Fatalf("convoy blocked --domain accounts: exit %d %v\n%s%s", code, err, out, stderr)
	}
	if out, stderr, code := convoyCmd("blocked"); code != 0 || strings.TrimSpace(out) != `{"orders":[]}` {
		t.Fatalf("convoy blocked (orders): exit %d\n%s%s", code, out, stderr)
	}

	// status: as GET /api/accounts/{id} answers, but for the lag.
	var page, answered map[string]any
	out, stderr, code = convoyCmd("status", "--domain", "accounts", id)
	if err := json.Unmarshal([]byte(out), &page); err != nil || code != 0 {
		t.Fatalf("convoy status --domain accounts: exit %d %v\n%s%s", code, err, out, stderr)
	}
	if status := e.get(t, "/api/accounts/"+id, &answered); status != 200 {
		t.Fatalf("GET the account: %d %v", status, answered)
	}
	delete(answered, "lag")
	if got, want := canonical(t, page), canonical(t, answered); got != want {
		t.Fatalf("convoy status answers\n%s\nGET answers\n%s", got, want)
	}
	if page["appliedSeq"] != 1.0 || page["parked"] != 2.0 {
		t.Fatalf("the account before the skip: %v", page)
	}
	if _, stderr, code := convoyCmd("status", id); code == 0 || !strings.Contains(stderr, "order") {
		t.Fatalf("convoy status (orders) of an account's id: exit %d\n%s", code, stderr)
	}

	// skip seq 2: the deposit and the withdrawal behind it apply.
	out, stderr, code = convoyCmd("skip", "--domain", "accounts", id, "2")
	if code != 0 || !strings.Contains(out, `"accountId":"acc-ops"`) || !strings.Contains(out, `"drained":[3,4]`) {
		t.Fatalf("convoy skip --domain accounts: exit %d\n%s%s", code, out, stderr)
	}
	var after map[string]any
	if status := e.get(t, "/api/accounts/"+id, &after); status != 200 || after["appliedSeq"] != 4.0 || after["parked"] != 0.0 ||
		after["balance"] != float64(250-100) || !strings.Contains(fmt.Sprint(after["rejected"]), "skipped by operator") {
		t.Fatalf("the account after the skip: %d %v", status, after)
	}
	if out, _, code := convoyCmd("blocked", "--domain", "accounts"); code != 0 || strings.TrimSpace(out) != `{"accounts":[]}` {
		t.Fatalf("convoy blocked --domain accounts after the skip: exit %d %s", code, out)
	}

	// An unknown domain: a usage error naming the registered ones.
	if _, stderr, code := convoyCmd("blocked", "--domain", "parcels"); code != 2 || !strings.Contains(stderr, "orders, accounts") {
		t.Fatalf("convoy blocked --domain parcels: exit %d\n%s", code, stderr)
	}
}

// canonical is v's JSON with sorted members, for comparing two answers.
func canonical(t *testing.T, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
