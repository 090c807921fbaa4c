package devhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// TestOperatorCommands runs `convoy replay` and `convoy skip` (the binary,
// as an operator would) against the emulation and Azurite, with AutoReplay
// off. The oracles are the emulation's own queues (what was re-sent, what is
// still dead-lettered) and the orders' state over HTTP, never the commands'
// own reports alone:
//
//   - replay without StateStorage refuses to run, naming it, and sends nothing;
//   - replay leaves a dead letter of a permanent cause (a poison message)
//     dead-lettered and says why; skip of any seq but the missing one is
//     refused and changes nothing; skip of the missing seq drains the tail;
//   - replay re-sends a dead letter of a transient cause, which heals its order;
//   - replay completes a dead letter whose seq the order already applied
//     (here: skipped) without re-sending it, as POST /replay does.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		o.Settings["AutoReplayEnabled"] = "false"
		o.Settings["TransientRetrySeconds"] = "1"
		p := o.Queues["orders"]
		p.MaxDeliveryCount = 3
		o.Queues["orders"] = p
		o.TimeScale = 0.05 // locks of 3 s: a replay's receiver holds other orders' dead letters that long
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bus := "ServiceBusConnection=" + e.host.ServiceBusConnectionString()
	storage := "StateStorage=" + e.storage.ConnectionString()
	convoyCmd := func(env []string, args ...string) (string, string, int) {
		t.Helper()
		return runConvoy(ctx, t, env, args...)
	}
	orders := e.host.Queue("orders")
	deadLettered := func(order string) []int64 {
		var seqs []int64
		for _, m := range orders.DeadLetters() {
			if m.SessionID == order {
				seq, _ := convoy.IntProperty(m.Properties[convoy.PropSeq])
				seqs = append(seqs, seq)
			}
		}
		return seqs
	}
	resent := func(order string) int {
		n := 0
		for _, m := range orders.Sent() {
			if m.SessionID == order && strings.Contains(m.MessageID, "#replay-") {
				n++
			}
		}
		return n
	}
	order := func(id string) map[string]any {
		t.Helper()
		var v map[string]any
		if code := e.get(t, "/api/orders/"+id, &v); code != 200 {
			t.Fatalf("GET order %s: %d %v", id, code, v)
		}
		return v
	}
	waitDeadLettered := func(id string) {
		t.Helper()
		for len(deadLettered(id)) == 0 {
			if ctx.Err() != nil {
				t.Fatalf("%s: seq 2 never dead-lettered", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := e.host.WaitIdle(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}

	// A poison message (permanent) and a transient failure, each order's seq 2.
	e.poison(t, "poisoned")
	waitDeadLettered("poisoned")
	e.failSeqs(func(m *devbus.Message, seq int64) bool { return m.SessionID == "healable" && seq == 2 })
	e.send(ctx, "orders",
		rawOrderMessage("H:0", "healable", "H", 1, `{"transaction":{"orderId":"healable","op":"CreateOrder","currency":"EUR"}}`),
		rawOrderMessage("H:1", "healable", "H", 2, `{"transaction":{"orderId":"healable","op":"AddTransaction","txId":"t-1","amount":7}}`),
		rawOrderMessage("H:2", "healable", "H", 3, `{"transaction":{"orderId":"healable","op":"AddTransaction","txId":"t-2","amount":5}}`))
	waitDeadLettered("healable")
	e.host.InjectFault(nil)

	// Without StateStorage: refused, naming the setting; nothing re-sent.
	_, stderr, code := convoyCmd([]string{bus}, "replay", "healable")
	if code == 0 || !strings.Contains(stderr, "StateStorage is required") || resent("healable") != 0 || len(deadLettered("healable")) != 1 {
		t.Fatalf("replay without StateStorage: exit %d, %d re-sent, dead letters %v\n%s", code, resent("healable"), deadLettered("healable"), stderr)
	}

	// The poison message is left, with why; nothing re-sent.
	out, stderr, code := convoyCmd([]string{bus, storage}, "replay", "poisoned")
	var rep struct {
		Replayed []any `json:"replayed"`
		Left     []struct {
			Seq   int64  `json:"seq"`
			Cause string `json:"cause"`
			Why   string `json:"why"`
		} `json:"left"`
	}
	_ = json.Unmarshal([]byte(out), &rep)
	if code != 0 || len(rep.Replayed) != 0 || len(rep.Left) != 1 || rep.Left[0].Seq != 2 || rep.Left[0].Cause != "permanent" ||
		!strings.Contains(rep.Left[0].Why, "unreadable") || !strings.Contains(stderr, "convoy skip poisoned") {
		t.Fatalf("replay of a poison message: exit %d\n%s%s", code, out, stderr)
	}
	if resent("poisoned") != 0 || fmt.Sprint(deadLettered("poisoned")) != "[2]" {
		t.Fatalf("after replay of the poison message: %d re-sent, dead letters %v; want it left", resent("poisoned"), deadLettered("poisoned"))
	}

	// POST /api/orders/{id}/replay answers the same (one code path), once
	// the command's receiver no longer holds the dead letters locked.
	for {
		status, body, _ := e.postH(t, "/api/orders/poisoned/replay")
		if status == 503 && ctx.Err() == nil {
			time.Sleep(time.Second)
			continue
		}
		left, _ := body["left"].([]any)
		if status != 200 || len(left) != 1 || !strings.Contains(fmt.Sprint(left[0]), "cause:permanent") || resent("poisoned") != 0 {
			t.Fatalf("POST replay of a poison message: %d %v, %d re-sent", status, body, resent("poisoned"))
		}
		break
	}

	// Skip: any seq but the missing one is refused and changes nothing.
	for _, seq := range []string{"3", "1", "0", "x"} {
		_, stderr, code := convoyCmd([]string{storage}, "skip", "poisoned", seq)
		if v := order("poisoned"); code == 0 || v["appliedSeq"] != 1.0 || v["parked"] != 1.0 || stderr == "" {
			t.Fatalf("skip seq %s: exit %d, order %v\n%s", seq, code, v, stderr)
		}
	}
	out, stderr, code = convoyCmd([]string{storage}, "skip", "poisoned", "2") // no ServiceBusConnection: skip needs none
	v := order("poisoned")
	if code != 0 || !strings.Contains(out, `"drained":[3]`) || v["appliedSeq"] != 3.0 || v["parked"] != 0.0 ||
		!strings.Contains(fmt.Sprint(v["rejected"]), "skipped by operator") {
		t.Fatalf("skip of the missing seq: exit %d, order %v\n%s%s", code, v, out, stderr)
	}

	// The transient one is re-sent (the poison replay's receiver may hold
	// it locked for a lock duration: run again, as the answer says).
	for {
		out, stderr, code = convoyCmd([]string{bus, storage}, "replay", "healable")
		if code == 0 || !strings.Contains(stderr, "locked by another reader") || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if code != 0 || !strings.Contains(out, `"seq":2`) || resent("healable") != 1 {
		t.Fatalf("replay of a transient dead letter: exit %d, %d re-sent\n%s%s", code, resent("healable"), out, stderr)
	}
	if err := e.host.WaitIdle(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if v := order("healable"); v["appliedSeq"] != 3.0 || v["total"] != 12.0 || len(deadLettered("healable")) != 0 {
		t.Fatalf("healable after its replay: %v, dead letters %v", v, deadLettered("healable"))
	}

	// The poison message's seq is applied now (skipped): a replay completes
	// it as a duplicate and re-sends nothing.
	for {
		out, stderr, code = convoyCmd([]string{bus, storage}, "replay", "poisoned")
		if code == 0 || !strings.Contains(stderr, "locked by another reader") || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if code != 0 || !strings.Contains(out, `"duplicates":[{"seq":2`) || resent("poisoned") != 0 || len(deadLettered("poisoned")) != 0 {
		t.Fatalf("replay of a skipped seq: exit %d, %d re-sent, dead letters %v\n%s%s", code, resent("poisoned"), deadLettered("poisoned"), out, stderr)
	}
}

// runConvoy runs the convoy binary with args and only env (and PATH), in a
// folder with no local.settings.json: its stdout, its stderr and its exit
// code.
func runConvoy(ctx context.Context, t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Dir = t.TempDir()
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	began := time.Now()
	err := cmd.Run()
	t.Logf("convoy %s: %.2f s", strings.Join(args, " "), time.Since(began).Seconds()) // a figure to read, not a check
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errs.String(), 0
	case errors.As(err, &exit):
		return out.String(), errs.String(), exit.ExitCode()
	}
	t.Fatalf("convoy %v: %v", args, err)
	return "", "", -1
}
