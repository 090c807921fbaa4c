package azurite

import (
	"sync"
	"sync/atomic"
	"testing"
)

// sharedAccounts bounds the accounts one test binary takes from Shared: the
// end-to-end suite, the largest user, takes about forty.
const sharedAccounts = 200

var shared struct {
	once   sync.Once
	server *Server
	err    error
	taken  atomic.Int32
}

// Shared is an account of its own on the one Azurite this test binary
// shares, started on first use (in memory) and stopped by StopShared.
// Accounts are separate namespaces, so tests that share the server stay
// independent, and the package pays Azurite's start (about 1.3 s of CPU)
// once instead of per test. A test that stops or restarts its storage
// starts its own server instead.
func Shared(tb testing.TB) Account {
	tb.Helper()
	shared.once.Do(func() { shared.server, shared.err = Start(Options{Accounts: sharedAccounts}) })
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	n := int(shared.taken.Add(1))
	if n > sharedAccounts {
		tb.Fatalf("more than %d tests took a shared Azurite account: raise sharedAccounts", sharedAccounts)
	}
	return Account{Name: AccountName(n), Port: shared.server.Port}
}

// StopShared stops the shared server, if Shared started one (TestMain calls
// it after the tests).
func StopShared() {
	if shared.server != nil {
		shared.server.Stop()
	}
}
