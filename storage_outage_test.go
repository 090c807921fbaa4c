package main

// The handler with Table Storage hung: Azurite stopped with SIGSTOP, so it
// accepts connections (the kernel does) and never answers, as a new user
// finds it after pausing the emulator. Every operator endpoint and the
// AutoReplay timer must answer within seconds, saying storage is unavailable.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/settings"
)

// hungStorage starts an Azurite of the test's own (the one TestMain starts
// is shared) and returns its connection string and a func that stops it with
// SIGSTOP; the test's cleanup resumes and ends it.
func hungStorage(t *testing.T) (conn string, hang func()) {
	t.Helper()
	bin := os.Getenv("AZURITE_TABLE")
	if bin == "" {
		bin = ".tools/node_modules/.bin/azurite-table"
	}
	port := refusingPort(t)
	cmd := exec.Command(bin, "--tableHost", "127.0.0.1", "--tablePort", strconv.Itoa(port),
		"--disableTelemetry", "--skipApiVersionCheck", "--silent", "--inMemoryPersistence")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("the storage outage test needs Azurite (run `make tools`): %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	endpoint := fmt.Sprintf("http://127.0.0.1:%d/devstoreaccount1", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(endpoint); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Azurite did not answer within 30s")
		}
	}
	conn = strings.Replace(settings.DevelopmentStorage, "http://127.0.0.1:10002/", fmt.Sprintf("http://127.0.0.1:%d/", port), 1)
	return conn, func() {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
}

// hungBound is what TestOperatorEndpointsWithStorageHung accepts: the
// endpoints' deadline (handler.ReadDeadline, SkipDeadline: 5 s) and
// AutoReplay's first read (two tries of 3 s, tablestore.OperatorRetry), with
// room for a loaded machine. Before, they took 20 s, 30 s and 60 s.
const hungBound = 8 * time.Second

// TestOperatorEndpointsWithStorageHung: with Table Storage accepting
// connections and never answering, the order's state, the blocked list, the
// summary, the replays and a skip answer 503 in the JSON error shape, and an
// AutoReplay run pauses saying storage is failing, each within hungBound
// (the target is 5 s). They are called at once, each timed on its own.
func TestOperatorEndpointsWithStorageHung(t *testing.T) {
	t.Parallel()
	const timer = `{"Data":{"timer":{"Schedule":{"AdjustForDST":true},"ScheduleStatus":null,"IsPastDue":false}},"Metadata":{"sys":{"MethodName":"AutoReplay"}}}`
	conn, hang := hungStorage(t)
	a := startAppOn(t, conn, refusingPort(t))
	a.block(t, "o-1")
	// A first call with storage up, so the clients hold a kept-alive
	// connection to it as they would in service.
	if status, _ := a.call(t, "GET", "/api/orders/o-1", ""); status != 200 {
		t.Fatalf("order status with storage up: %d, want 200", status)
	}
	hang()
	calls := []struct{ method, path, body string }{
		{"GET", "/api/orders/o-1", ""},
		{"GET", "/api/orders?blocked=true", ""},
		{"GET", "/api/summary", ""},
		{"POST", "/api/orders/o-1/replay", ""},
		{"POST", "/api/deadletters/replay", ""},
		{"POST", "/api/orders/o-1/skip?seq=1", ""},
		{"POST", "/AutoReplay", timer},
	}
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			status, out, took, err := timedCall(a.url, c.method, c.path, c.body)
			t.Logf("%s %s: %d after %s", c.method, c.path, status, took.Round(time.Millisecond))
			if err != nil {
				t.Errorf("%s %s: %v after %s", c.method, c.path, err, took.Round(time.Millisecond))
				return
			}
			if took > hungBound {
				t.Errorf("%s %s answered after %s, more than %s", c.method, c.path, took.Round(time.Millisecond), hungBound)
			}
			if c.path == "/AutoReplay" {
				logs, _ := out["Logs"].([]any)
				paused := 0
				for _, l := range logs {
					if line, _ := l.(string); strings.HasPrefix(line, "auto-replay paused") && strings.Contains(line, "storage is failing") {
						paused++
					}
				}
				// Every domain's table is on the account that hangs.
				if status != 200 || paused != len(domains.All) {
					t.Errorf("AutoReplay: %d %v, want 200 with an auto-replay paused line saying storage is failing per domain", status, out)
				}
				return
			}
			if msg, _ := out["error"].(string); status != 503 || msg == "" {
				t.Errorf("%s %s: %d %v, want 503 with an error", c.method, c.path, status, out)
			}
		})
	}
	wg.Wait()
}

// timedCall is app.call for a goroutine other than the test's: it sends a
// request and decodes the JSON answer, reporting what went wrong instead of
// ending the test.
func timedCall(base, method, path, body string) (status int, out map[string]any, took time.Duration, err error) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	start := time.Now()
	resp, err := client.Do(req)
	took = time.Since(start)
	if err != nil {
		return 0, nil, took, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, took, fmt.Errorf("%d %s: not a JSON object", resp.StatusCode, raw)
	}
	return resp.StatusCode, out, took, nil
}
