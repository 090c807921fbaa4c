// Package testenv is where a test says what it needs beyond the Go toolchain,
// so that `go test -short` (make unit) leaves out, by name and saying why,
// the tests that start servers (Azurite, the handler under the emulation,
// Node.js, Chromium) or wait on real time for long, and make test runs them
// all. One place decides what -short leaves out.
package testenv

import "testing"

// NeedsServers skips t under -short: it starts what (Azurite, say).
func NeedsServers(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: left out by -short (make unit); make test runs it", what)
	}
}

// Long skips t under -short: it waits on real time (why says for what).
func Long(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("waits %s: left out by -short (make unit); make test runs it", why)
	}
}

// Short reports whether -short is set, for a TestMain deciding whether to
// start a package's shared server (it must call flag.Parse first).
func Short() bool { return testing.Short() }
