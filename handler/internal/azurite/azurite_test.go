package azurite

import (
	"strings"
	"testing"
)

// TestTakenPortRefused: Azurite asked for a port another Azurite holds is
// refused, rather than handing the caller the other one's storage (which
// answered its readiness check while it failed to bind), and with it the
// other's lifetime: `make devhost` lost its storage when a second one
// stopped.
func TestTakenPortRefused(t *testing.T) {
	first, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	second, err := Start(Options{Port: first.Port})
	if err == nil {
		second.Stop()
		t.Fatalf("a second Azurite on port %d started: it would have used the first one's storage", first.Port)
	}
	if !strings.Contains(err.Error(), "taken") {
		t.Fatalf("error %q does not say the port is taken", err)
	}
}

// TestReadyOnlyWhenItsOwnProcessListens: two starts racing for one port (both
// past Start's check that it is free, as two `make devhost` started within
// seconds are): the one that loses the bind is an error, although the
// winner answers on the port it asked for.
func TestReadyOnlyWhenItsOwnProcessListens(t *testing.T) {
	first, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	second, err := start(Options{Port: first.Port}) // as if it had passed the check just before first bound
	if err == nil {
		second.Stop()
		t.Fatalf("a second Azurite that could not bind port %d was reported ready: the other one answered for it", first.Port)
	}
	if !strings.Contains(err.Error(), "EADDRINUSE") {
		t.Fatalf("error %q does not say the port is in use", err)
	}
}
