package devbus

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jsModules is the node_modules folder holding @azure/service-bus:
// $SERVICEBUS_JS_MODULES, else the project-local install under .tools/ (the
// Makefile's tools target).
func jsModules(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SERVICEBUS_JS_MODULES")
	if dir == "" {
		root, err := filepath.Abs("../../..")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".tools", "node_modules")
	}
	if _, err := os.Stat(filepath.Join(dir, "@azure", "service-bus", "package.json")); err != nil {
		t.Fatalf("@azure/service-bus not found in %s: run `make tools` (it installs it from npm into .tools/)", dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the JavaScript Service Bus SDK runs on it")
	}
	return dir
}

// jsConformanceChecks is how many checks conformance.mjs runs when every
// queue is set: fewer "ok" lines means a check was skipped or lost.
const jsConformanceChecks = 38

// TestJavaScriptSDKConformance holds the emulation to Service Bus with a
// client nobody here wrote: testdata/conformance/conformance.mjs drives
// @azure/service-bus with its default (retrying) options, with expectations
// taken from Service Bus's documentation and the SDKs' live tests (each
// check names its source).
func TestJavaScriptSDKConformance(t *testing.T) {
	t.Parallel()
	modules := jsModules(t)
	// LockDuration 5 s on the lock-expiry queues: the shortest Service Bus
	// takes (azservicebus live test TestReceiverMessageLockExpires: PT5S).
	queues := map[string]*Queue{
		"orders":         NewQueue("orders", QueueProperties{RequiresSession: true, RequiresDuplicateDetection: true, LockDuration: 30 * time.Second}),
		"plain":          NewQueue("plain", QueueProperties{LockDuration: 30 * time.Second}),
		"lock":           NewQueue("lock", QueueProperties{LockDuration: 5 * time.Second}),
		"session-lock":   NewQueue("session-lock", QueueProperties{RequiresSession: true, LockDuration: 5 * time.Second}),
		"defer":          NewQueue("defer", QueueProperties{}),
		"session-defer":  NewQueue("session-defer", QueueProperties{RequiresSession: true}),
		"schedule":       NewQueue("schedule", QueueProperties{}),
		"blank":          NewQueue("blank", QueueProperties{RequiresSession: true}),
		"locked-session": NewQueue("locked-session", QueueProperties{RequiresSession: true}),
	}
	b, err := StartBus("127.0.0.1:0", queues, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The script resolves @azure/service-bus from its own folder.
	dir := t.TempDir()
	script, err := os.ReadFile("testdata/conformance/conformance.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conformance.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	// The script gives up at 80 s (each check at 45 s); passing, it takes
	// about 15 s.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "conformance.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SERVICEBUS_CONNECTION_STRING="+b.ConnectionString(), "QUEUE=orders", "PLAIN_QUEUE=plain",
		"LOCK_QUEUE=lock", "SESSION_LOCK_QUEUE=session-lock", "DEFER_QUEUE=defer", "SESSION_DEFER_QUEUE=session-defer",
		"SCHEDULE_QUEUE=schedule", "BLANK_QUEUE=blank", "LOCKED_SESSION_QUEUE=locked-session")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("conformance.mjs (%v):\n%s", time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("the JavaScript SDK's checks failed: %v", err)
	}
	lines := "\n" + string(out)
	if n := strings.Count(lines, "\nskip "); n > 0 {
		t.Fatalf("%d checks skipped", n)
	}
	if n := strings.Count(lines, "\nok "); n < jsConformanceChecks {
		t.Fatalf("only %d checks passed, want %d", n, jsConformanceChecks)
	}
}
