package main

// The handler with Service Bus unreachable: the real azservicebus client
// (newClients, as serve builds it) on a port where nothing listens or on one
// that accepts TCP and never answers, real Table Storage (Azurite), and the
// real echo server (newServer). Every HTTP and timer function must answer
// well inside the host's functionTimeout, saying what it could not do.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/settings"
)

// storage is the connection string of the Azurite these tests start.
var storage string

// TestMain starts Azurite's Table service as handler/internal/azurite does
// (which the root package may not import): $AZURITE_TABLE or the one `make
// tools` installs, on a free loopback port, in memory.
func TestMain(m *testing.M) {
	bin := os.Getenv("AZURITE_TABLE")
	if bin == "" {
		bin = filepath.Join(".tools", "node_modules", ".bin", "azurite-table")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--tableHost", "127.0.0.1", "--tablePort", strconv.Itoa(port),
		"--disableTelemetry", "--skipApiVersionCheck", "--silent", "--inMemoryPersistence")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "the outage tests need Azurite (run `make tools`): %v\n", err)
		os.Exit(1)
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d/devstoreaccount1", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(endpoint); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			fmt.Fprintln(os.Stderr, "Azurite did not answer within 30s")
			os.Exit(1)
		}
	}
	storage = strings.Replace(settings.DevelopmentStorage, "http://127.0.0.1:10002/", fmt.Sprintf("http://127.0.0.1:%d/", port), 1)
	code := m.Run()
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	os.Exit(code)
}

// outages are the two ways Service Bus is unreachable.
var outages = []struct {
	name string
	port func(*testing.T) int
	why  string // what a blocked order's missing.why says
}{
	{"refused", refusingPort, "could not be reached"},
	{"stalled", stallingPort, "did not answer within"},
}

// refusingPort is a loopback port where nothing listens.
func refusingPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// stallingPort is a loopback port that accepts connections, reads what they
// send and never writes a byte.
func stallingPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

func fresh(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// app is the handler served over HTTP as serve builds it, on fresh tables.
type app struct {
	url string
	cfg settings.Settings
	c   *clients
}

func startApp(t *testing.T, serviceBusPort int) *app {
	return startAppOn(t, storage, serviceBusPort)
}

// startAppOn is startApp on the Table Storage of connection string conn.
func startAppOn(t *testing.T, conn string, serviceBusPort int) *app {
	env := map[string]string{
		"ServiceBusConnection": fmt.Sprintf("Endpoint=sb://127.0.0.1:%d;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;", serviceBusPort),
		"StateStorage":         conn,
		"OrdersTableName":      fresh("o"),
		"LedgersTableName":     fresh("l"),
	}
	cfg, err := settings.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := newServer(cfg, c, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(func() { srv.Close(); c.close() })
	return &app{url: srv.URL, cfg: cfg, c: c}
}

// block parks seq 2 of each order in the real store: each is blocked,
// waiting for seq 1.
func (a *app) block(t *testing.T, ids ...string) {
	store := a.c.orderStore(a.cfg.Default().Table)
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store})
	for _, id := range ids {
		amount := int64(5)
		m := convoy.Message{Seq: 2, MessageID: "L-1:" + id, Command: orders.Transaction{OrderID: id, Op: orders.AddTransaction, TxID: "t-1", Amount: &amount}}
		if _, err := p.Process(context.Background(), id, []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
}

// runAutoReplay invokes the AutoReplay timer function once, as the host does:
// its run is what learns where the blocked orders' missing messages are.
func (a *app) runAutoReplay(t *testing.T) {
	t.Helper()
	status, out := a.call(t, "POST", "/AutoReplay", `{"Data":{"timer":{"Schedule":{"AdjustForDST":true},"IsPastDue":false}},"Metadata":{"sys":{}}}`)
	if status != 200 {
		t.Fatalf("AutoReplay: %d %v", status, out)
	}
}

// answerBound is what the tests accept as "answers within 5 s" (timings are
// not asserted tightly; the measured times are logged).
const answerBound = 10 * time.Second

// call sends a request and decodes the JSON answer, failing the test if it
// takes longer than answerBound.
func (a *app) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, a.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 2 * answerBound}
	start := time.Now()
	resp, err := client.Do(req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s %s: %v after %s", method, path, err, took.Round(time.Millisecond))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	t.Logf("%s %s: %d after %s", method, path, resp.StatusCode, took.Round(time.Millisecond))
	if took > answerBound {
		t.Errorf("%s %s answered after %s, more than %s", method, path, took.Round(time.Millisecond), answerBound)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d %s: not a JSON object", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// checkBlocked checks a blocked list: every order, each with its missing
// message "unknown" and why naming the cause.
func checkBlocked(t *testing.T, status int, page map[string]any, why string, orders ...string) {
	t.Helper()
	list, _ := page["orders"].([]any)
	if status != 200 || len(list) != len(orders) {
		t.Fatalf("blocked list: %d %v, want 200 with %v", status, page, orders)
	}
	for i, o := range list {
		o, _ := o.(map[string]any)
		m, _ := o["missing"].(map[string]any)
		w, _ := m["why"].(string)
		if o["orderId"] != orders[i] || m["where"] != "unknown" || !strings.Contains(w, why) {
			t.Errorf("blocked order %d: %v, want %s with missing.where \"unknown\" and a why saying %q", i, o, orders[i], why)
		}
	}
}

// TestBlockedListWithoutServiceBus: the blocked list lists the blocked orders,
// each with where "unknown" and why (an AutoReplay run found the dead-letter
// queue unreadable), within seconds.
func TestBlockedListWithoutServiceBus(t *testing.T) {
	t.Parallel()
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			a := startApp(t, o.port(t))
			a.block(t, "o-1", "o-2")
			a.runAutoReplay(t)
			status, page := a.call(t, "GET", "/api/orders?blocked=true", "")
			checkBlocked(t, status, page, o.why, "o-1", "o-2")
		})
	}
}

// TestSummaryAndDashboardWithoutServiceBus: the summary answers with what
// storage gives and says the dead-letter queue could not be read; the
// dashboard's page and its data (the summary and the blocked list, fetched
// at once as the page does) answer within seconds.
func TestSummaryAndDashboardWithoutServiceBus(t *testing.T) {
	t.Parallel()
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			a := startApp(t, o.port(t))
			a.block(t, "o-1", "o-2")
			a.runAutoReplay(t)
			var wg sync.WaitGroup
			var sumStatus, pageStatus int
			var sum, page map[string]any
			wg.Add(2)
			go func() { defer wg.Done(); sumStatus, sum = a.call(t, "GET", "/api/summary", "") }()
			go func() {
				defer wg.Done()
				pageStatus, page = a.call(t, "GET", "/api/orders?blocked=true&pageSize=500", "")
			}()
			wg.Wait()
			missing, _ := sum["missingBy"].(map[string]any)
			why, _ := sum["deadLettersUnreadable"].(string)
			if sumStatus != 200 || sum["blockedOrders"] != 2.0 || sum["parkedMessages"] != 2.0 || missing["unknown"] != 2.0 ||
				sum["deadLetters"] != nil || !strings.Contains(why, o.why) {
				t.Errorf("summary: %d %v, want 200 with 2 blocked orders, missingBy unknown 2 and why the dead letters are unknown", sumStatus, sum)
			}
			checkBlocked(t, pageStatus, page, o.why, "o-1", "o-2")
			// The page, rendered: its data loaded, a row per blocked order,
			// and in its status line AutoReplay paused, with the reason the
			// dead letters are unknown.
			start := time.Now()
			dom := headless(t, a.url+"/api/dashboard")
			t.Logf("dashboard rendered in %s", time.Since(start).Round(time.Millisecond))
			if !strings.Contains(dom, `data-ready="true"`) || !strings.Contains(dom, `data-order="o-1"`) || !strings.Contains(dom, `data-order="o-2"`) ||
				!strings.Contains(dom, `class="error">auto-replay paused until`) || !strings.Contains(dom, "the dead-letter queue could not be read") {
				t.Errorf("the dashboard does not list the blocked orders with why their missing messages are unknown:\n%s", dom)
			}
		})
	}
}

// headless is the page at url as headless Chromium renders it (its DOM after
// its scripts ran). `make test` installs Chromium; the test never skips.
func headless(t *testing.T, url string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if bin, err = exec.LookPath("chromium-browser"); err != nil {
			t.Fatal("chromium is not installed: `make test` installs it (apt-get install chromium)")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=15000", "--dump-dom", url).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return string(out)
}

// TestReplayWithoutServiceBus: a replay of one order and of every dead
// letter answer 503, in the JSON error shape, with the report of what they
// did (nothing) beside the error.
func TestReplayWithoutServiceBus(t *testing.T) {
	t.Parallel()
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			a := startApp(t, o.port(t))
			a.block(t, "o-1")
			status, rep := a.call(t, "POST", "/api/orders/o-1/replay", "")
			if replayed, ok := rep["replayed"].([]any); status != 503 || !ok || len(replayed) != 0 || rep["orderId"] != "o-1" || rep["error"] == "" || rep["error"] == nil {
				t.Errorf("replay: %d %v, want 503 with an error and the report", status, rep)
			}
			status, all := a.call(t, "POST", "/api/deadletters/replay", "")
			if status != 503 || all["replayed"] != 0.0 || all["done"] != false || all["error"] == "" || all["error"] == nil {
				t.Errorf("replay everything: %d %v, want 503 with an error and the report", status, all)
			}
		})
	}
}

// TestAutoReplayWithoutServiceBus: a timer run replays nothing, pauses (its
// breaker opens) and says so in its Logs; so does the next run.
func TestAutoReplayWithoutServiceBus(t *testing.T) {
	t.Parallel()
	const timer = `{"Data":{"timer":{"Schedule":{"AdjustForDST":true},"ScheduleStatus":null,"IsPastDue":false}},"Metadata":{"sys":{"MethodName":"AutoReplay"}}}`
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			a := startApp(t, o.port(t))
			a.block(t, "o-1")
			for run := 1; run <= 2; run++ {
				status, out := a.call(t, "POST", "/AutoReplay", timer)
				logs, _ := out["Logs"].([]any)
				paused := 0
				for _, l := range logs {
					line, _ := l.(string)
					if strings.HasPrefix(line, "auto-replay replayed") {
						t.Errorf("run %d replayed during the outage: %s", run, line)
					}
					if strings.HasPrefix(line, "auto-replay paused") && strings.Contains(line, "circuit breaker open until") {
						paused++
					}
				}
				// Every domain's queue is on the namespace that is down.
				if status != 200 || paused != len(domains.All) {
					t.Errorf("run %d: %d %v, want 200 with an auto-replay paused line naming the breaker per domain", run, status, out)
				}
			}
		})
	}
}
