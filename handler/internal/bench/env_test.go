package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
)

var root = filepath.Join("..", "..", "..")

// Shared by the benchmarks that need them, started on first use and stopped
// by TestMain.
var shared struct {
	azOnce  sync.Once
	az      *azurite.Server
	azErr   error
	binOnce sync.Once
	binDir  string
	binErr  error
}

func sharedAzurite(b *testing.B) *azurite.Server {
	b.Helper()
	shared.azOnce.Do(func() { shared.az, shared.azErr = azurite.Start(azurite.Options{}) })
	if shared.azErr != nil {
		b.Fatal("the benchmarks need Azurite:", shared.azErr)
	}
	return shared.az
}

// handlerBinary builds the handler once, as `make build` does.
func handlerBinary(b *testing.B) string {
	b.Helper()
	shared.binOnce.Do(func() {
		if shared.binDir, shared.binErr = os.MkdirTemp("", "convoy-bench"); shared.binErr != nil {
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(shared.binDir, "convoy"), ".")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			shared.binErr = fmt.Errorf("build the handler: %v\n%s", err, out)
		}
	})
	if shared.binErr != nil {
		b.Fatal(shared.binErr)
	}
	return filepath.Join(shared.binDir, "convoy")
}

func stopShared() {
	if shared.az != nil {
		shared.az.Stop()
	}
	if shared.binDir != "" {
		os.RemoveAll(shared.binDir)
	}
}

// stagedApp stages the app like `make stage` (edit may change host.json or a
// function.json on the way) and loads it as the host emulation does.
func stagedApp(b *testing.B, edit func(name string, doc map[string]any)) *devhost.App {
	b.Helper()
	dir := b.TempDir()
	if _, err := devhost.Stage(root, handlerBinary(b), dir, edit); err != nil {
		b.Fatal(err)
	}
	app, err := devhost.LoadApp(dir, devhost.QueueSettings())
	if err != nil {
		b.Fatal(err)
	}
	return app
}

func function(b *testing.B, app *devhost.App, name string) devhost.Function {
	b.Helper()
	for _, f := range app.Functions {
		if f.Name == name {
			return f
		}
	}
	b.Fatalf("the app has no function %s", name)
	return devhost.Function{}
}

// orderMessages de-batches a generated ledger of n transactions over orders
// with the real publisher: the order messages it would send, in order.
func orderMessages(b *testing.B, ledgerID string, n int, orders []string) []convoy.Envelope {
	b.Helper()
	sender := &ledgertest.Sender{}
	p := ledgertest.Publisher(memstore.NewLedgers(), sender, ledger.PublisherOptions{})
	if _, err := p.Publish(context.Background(), ledgertest.Doc(ledgerID, n, orders, 0)); err != nil {
		b.Fatal(err)
	}
	return sender.Messages()
}

// hostMessage is m as the queue emulation delivers it.
func hostMessage(m convoy.Envelope) *devbus.Message {
	return &devbus.Message{MessageID: m.MessageID, SessionID: m.SessionID, ContentType: convoy.ContentType,
		Properties: m.Properties(), Body: m.Body, DeliveryCount: 1}
}

func orderIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return ids
}

// devhostEncode is the invocation body the host sends to deliver m to fn.
func devhostEncode(fn devhost.Function, m convoy.Envelope) []byte {
	return devhost.EncodeInvocation(fn, []*devbus.Message{hostMessage(m)}, time.Now())
}
