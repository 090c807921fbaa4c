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
