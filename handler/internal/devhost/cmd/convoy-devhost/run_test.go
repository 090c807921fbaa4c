package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// TestRunBreakAndStop runs the command as make devhost and make break do:
// run serves the staged app with the settings of local.settings.json, a
// second run on the same port is refused without touching the first one's
// files, break leaves one order blocked by a poison message (permanent), one
// by a transient failure, and one account by a poison message (the oracle:
// each domain's blocked list and a peek of its queue's dead-letter queue),
// and SIGTERM stops the emulation, the handler and Azurite: their processes
// exit and their ports are free.
func TestRunBreakAndStop(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", "..", "..", "..", ".."))
	dir := t.TempDir()
	build := func(out, pkg string) string {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
		return filepath.Join(dir, out)
	}
	handlerBin := build("convoy", ".")
	self := build("convoy-devhost", "./handler/internal/devhost/cmd/convoy-devhost")
	app := filepath.Join(dir, "app")
	if _, err := devhost.Stage(root, handlerBin, app, nil); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(dir, "local.settings.json")
	if err := os.WriteFile(settings, []byte(`{"IsEncrypted":false,"Values":{"AutoReplayEnabled":"false"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	port, sbPort := freePort(t), freePort(t)
	args := func(cmd string, more ...string) []string {
		return append([]string{cmd, "-app", app, "-port", strconv.Itoa(port), "-queues", filepath.Join(root, "infra", "local", "servicebus-emulator-config.json")}, more...)
	}
	runCmd := exec.Command(self, args("run", "-settings", settings, "-servicebus-port", strconv.Itoa(sbPort))...)
	runCmd.Dir = root                                       // Azurite is found from go.mod (.tools/)
	runCmd.Env = append(os.Environ(), "AutoReplayEnabled=") // empty: the file's value stands
	stdout, _ := runCmd.StdoutPipe()
	var stderr strings.Builder
	runCmd.Stderr = &stderr
	if err := runCmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- runCmd.Wait() }()
	defer func() { _ = runCmd.Process.Kill() }()

	banner := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "practise:") {
				banner <- b.String()
			}
		}
	}()
	var text string
	select {
	case text = <-banner:
	case err := <-exited:
		t.Fatalf("run exited: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("no banner\n%s", stderr.String())
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, want := range []string{url + "/api/dashboard", url + "/api/summary", url + "/api/orders?blocked=true",
		"export ServiceBusConnection='Endpoint=sb://127.0.0.1:" + strconv.Itoa(sbPort), "export StateStorage='", "NOT CHECKED",
		"AutoReplay:  off (AutoReplayEnabled=false)", "make break PORT=" + strconv.Itoa(port)} {
		if !strings.Contains(text, want) {
			t.Errorf("the banner does not say %q:\n%s", want, text)
		}
	}
	var st state
	data, err := os.ReadFile(filepath.Join(app, stateFile))
	if err != nil || json.Unmarshal(data, &st) != nil {
		t.Fatalf("state file: %v %s", err, data)
	}
	azPort := 0
	if i := strings.Index(st.StateStorage, "TableEndpoint=http://127.0.0.1:"); i >= 0 {
		azPort, _ = strconv.Atoi(strings.SplitN(st.StateStorage[i+len("TableEndpoint=http://127.0.0.1:"):], "/", 2)[0])
	}
	if azPort == 0 {
		t.Fatalf("no Azurite port in %q", st.StateStorage)
	}

	// A second run on the port: refused, saying how to choose another; the
	// first one's files stay.
	out, err := exec.Command(self, args("run", "-settings", settings)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("port %d is taken", port)) || !strings.Contains(string(out), "PORT=") {
		t.Errorf("a second run on the port: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(app, "convoy")); err != nil {
		t.Errorf("the running app's files after a second run: %v", err)
	}

	// break: one blocked order of each kind, and a blocked account.
	out, err = exec.Command(self, args("break")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Two orders and an account are blocked") || !strings.Contains(string(out), "AutoReplay is off") {
		t.Fatalf("break: %v\n%s", err, out)
	}
	var page struct {
		Orders []struct {
			OrderID    string `json:"orderId"`
			MissingSeq int64  `json:"missingSeq"`
		} `json:"orders"`
	}
	resp, err := http.Get(url + "/api/orders?blocked=true")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	kinds := map[string]bool{}
	for _, o := range page.Orders {
		if o.MissingSeq == 2 {
			kinds[strings.SplitN(o.OrderID, "-", 3)[1]] = true
		}
	}
	if len(page.Orders) != 2 || !kinds["poison"] || !kinds["transient"] {
		t.Errorf("blocked after break: %+v, want practice-poison-… and practice-transient-…, each missing seq 2", page.Orders)
	}
	// Each seq 2 is dead-lettered: the transient one readable, the poison
	// one not (its amount is text), both for their deliveries.
	client, err := azservicebus.NewClientFromConnectionString(st.ServiceBusConnection, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	dlq, err := client.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := dlq.PeekMessages(context.Background(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, m := range dead {
		if m.DeadLetterReason != nil && *m.DeadLetterReason == "MaxDeliveryCountExceeded" && m.SessionID != nil {
			bodies[strings.SplitN(*m.SessionID, "-", 3)[1]] = string(m.Body)
		}
	}
	if len(dead) != 2 || !strings.Contains(bodies["poison"], `"a lot"`) || bodies["transient"] == "" || strings.Contains(bodies["transient"], `"a lot"`) {
		t.Errorf("dead letters after break: %d, bodies %v; want seq 2 of each order, the poison one unreadable", len(dead), bodies)
	}
	// The account: blocked missing its seq 2, which is in the accounts
	// queue's dead letters, unreadable.
	var accounts struct {
		Accounts []struct {
			AccountID  string `json:"accountId"`
			MissingSeq int64  `json:"missingSeq"`
		} `json:"accounts"`
	}
	resp, err = http.Get(url + "/api/accounts?blocked=true")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&accounts)
	resp.Body.Close()
	if len(accounts.Accounts) != 1 || !strings.HasPrefix(accounts.Accounts[0].AccountID, "practice-account-") || accounts.Accounts[0].MissingSeq != 2 {
		t.Errorf("blocked accounts after break: %+v, want practice-account-… missing seq 2", accounts.Accounts)
	}
	accountDLQ, err := client.NewReceiverForQueue("accounts", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	deadAccounts, err := accountDLQ.PeekMessages(context.Background(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(deadAccounts) != 1 || deadAccounts[0].SessionID == nil || !strings.HasPrefix(*deadAccounts[0].SessionID, "practice-account-") ||
		deadAccounts[0].ApplicationProperties["seq"] != int64(2) || !strings.Contains(string(deadAccounts[0].Body), `"a lot"`) {
		t.Errorf("account dead letters after break: %d %+v; want seq 2 of practice-account-…, unreadable", len(deadAccounts), deadAccounts)
	}

	// SIGTERM stops everything.
	children := childrenOf(runCmd.Process.Pid)
	if len(children) < 2 {
		t.Errorf("run's child processes %v, want the handler and Azurite", children)
	}
	if err := runCmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("run after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop within 30 s of SIGTERM")
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range children {
		for syscall.Kill(pid, 0) == nil && !zombie(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d outlived run", pid)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for name, p := range map[string]int{"front end": port, "Service Bus": sbPort, "Azurite": azPort} {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second); err == nil {
			c.Close()
			t.Errorf("the %s's port %d still answers after SIGTERM", name, p)
		}
	}
	if _, err := os.Stat(filepath.Join(app, stateFile)); !os.IsNotExist(err) {
		t.Errorf("the state file outlived run: %v", err)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// childrenOf lists the processes whose parent is pid (/proc).
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// zombie: the process has exited and waits to be reaped (by init, here).
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}
