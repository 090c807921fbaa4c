// Package azurite starts a real Azurite Table service for tests and the local
// demo (a development tool, never used in Azure): on a free
// loopback port, without telemetry, in memory or on disk. It never skips: a
// missing Azurite is an error that says how to install it (make tools).
package azurite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/internal/syncio"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// AccountKey is Azurite's well-known development account key.
const AccountKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// Server is a running Azurite Table service; its Account is the
// development account (devstoreaccount1), which every Azurite has.
type Server struct {
	Account
	Dir      string // data directory when persistent, else ""
	cmd      *exec.Cmd
	exited   chan struct{}
	output   *syncio.Writer
	stopOnce sync.Once
}

// Options for Start.
type Options struct {
	Port int    // 0 picks a free port
	Dir  string // persist to this directory; "" keeps data in memory
	// Accounts declares that many more accounts (AccountName(1) …), each
	// with AccountKey: namespaces of their own on one server (Shared).
	Accounts int
}

// Binary returns the azurite-table executable: $AZURITE_TABLE, else the
// project-local install under .tools/ (see the Makefile's tools target).
func Binary() (string, error) {
	if p := os.Getenv("AZURITE_TABLE"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".tools", "node_modules", ".bin", "azurite-table")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("azurite-table not found at %s: run `make tools` (it installs Azurite from npm into .tools/)", p)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory; set AZURITE_TABLE")
		}
		dir = parent
	}
}

// Start launches Azurite and waits until it says it is listening on the port
// and answers there. A port it picked itself
// may be taken by another process before Azurite binds it: it then tries
// another, a few times.
func Start(opts Options) (*Server, error) {
	if opts.Port != 0 {
		// A port someone else holds (another Azurite, say) would answer the
		// readiness check while this Azurite fails to bind and exits: the
		// caller would then use, and later lose, the other one's storage.
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Port))
		if err != nil {
			return nil, fmt.Errorf("port %d is taken: %w", opts.Port, err)
		}
		l.Close()
		return start(opts)
	}
	var err error
	for range 3 {
		if opts.Port, err = freePort(); err != nil {
			return nil, err
		}
		var s *Server
		if s, err = start(opts); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func start(opts Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	args := []string{"--tableHost", "127.0.0.1", "--tablePort", fmt.Sprint(opts.Port),
		"--disableTelemetry", "--skipApiVersionCheck", "--silent"}
	if opts.Dir == "" {
		args = append(args, "--inMemoryPersistence")
	} else {
		args = append(args, "--location", opts.Dir)
	}
	s := &Server{Account: Account{Name: devAccount, Port: opts.Port}, Dir: opts.Dir, exited: make(chan struct{}), output: &syncio.Writer{}}
	s.cmd = exec.Command(bin, args...)
	if opts.Accounts > 0 {
		// Declaring accounts replaces the default list: keep the
		// development account, which the demo and make devhost print.
		accounts := []string{devAccount + ":" + AccountKey}
		for i := 1; i <= opts.Accounts; i++ {
			accounts = append(accounts, AccountName(i)+":"+AccountKey)
		}
		s.cmd.Env = append(os.Environ(), "AZURITE_ACCOUNTS="+strings.Join(accounts, ";"))
	}
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	// Ready is what this process says, not whoever answers on the port:
	// another Azurite that bound the port between the check in Start and
	// this one's bind would answer HTTP while this one exits with
	// EADDRINUSE, and the caller would use (and later lose) its storage.
	started := fmt.Sprintf("successfully started on 127.0.0.1:%d", opts.Port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if strings.Contains(s.output.String(), started) {
			if resp, err := http.Get(s.Endpoint()); err == nil {
				resp.Body.Close()
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("azurite exited at start: %s", s.output.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("azurite did not answer within 30s: %s", s.output.String())
		}
	}
}

// devAccount is the development account every Azurite serves.
const devAccount = "devstoreaccount1"

// Account is one storage account of a running Azurite: its tables are its
// own, whatever other accounts of the same server hold.
type Account struct {
	Name string
	Port int
}

// AccountName is the name of the i-th account Options.Accounts declares.
func AccountName(i int) string { return fmt.Sprintf("account%04d", i) }

// Endpoint is the account's table service URL.
func (a Account) Endpoint() string {
	return fmt.Sprintf("http://127.0.0.1:%d/%s", a.Port, a.Name)
}

// ConnectionString is the account's explicit connection string.
func (a Account) ConnectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;TableEndpoint=%s;", a.Name, AccountKey, a.Endpoint())
}

// Stop interrupts Azurite (SIGINT lets it flush to disk) and waits for it.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
}

// NewTable creates a table with a fresh name and returns its client;
// transport, if not nil, sees every request (counting round trips).
func (a Account) NewTable(tb testing.TB, transport Doer) *aztables.Client {
	tb.Helper()
	client, _ := a.NewNamedTable(tb, transport)
	return client
}

// NewNamedTable is NewTable that also returns the table's name.
func (a Account) NewNamedTable(tb testing.TB, transport Doer) (*aztables.Client, string) {
	tb.Helper()
	opts := &aztables.ClientOptions{}
	if transport != nil {
		opts.Transport = transport
	}
	svc, err := aztables.NewServiceClientFromConnectionString(a.ConnectionString(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t" + hex.EncodeToString(b)
	client := svc.NewClient(name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.CreateTable(ctx, nil); err != nil {
		tb.Fatalf("create table %s: %v", name, err)
	}
	return client, name
}

// NewOrderStore is the processor's store on a fresh table, built as the
// program builds it (aztables for reads, tablestore.Batches for commits);
// transport, if not nil, sees every request of both.
func (a Account) NewOrderStore(tb testing.TB, transport Doer) *tablestore.Store {
	tb.Helper()
	table, name := a.NewNamedTable(tb, transport)
	opts := &azcore.ClientOptions{}
	if transport != nil {
		opts.Transport = transport
	}
	batches, err := tablestore.NewBatchesFromConnectionString(a.ConnectionString(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	return tablestore.New(table, batches.Table(name))
}

// Doer is the SDK's transport interface (policy.Transporter).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PID is the Azurite process's id (the benchmarks read its CPU time).
func (s *Server) PID() int { return s.cmd.Process.Pid }
