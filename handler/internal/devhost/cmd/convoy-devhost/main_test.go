package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppSettings: the app settings as Core Tools gives them to the host:
// local.settings.json's Values, each replaced by a non-empty environment
// variable of the same name (an empty one does not replace it), every other
// environment variable too, and the emulation's defaults under both.
func TestAppSettings(t *testing.T) {
	file := map[string]string{"AutoReplayEnabled": "true", "LogLevel": "info", "OrdersQueueName": "orders-x", "Empty": "kept"}
	got, fromEnv := appSettings(file, []string{"AutoReplayEnabled=false", "Empty=", "HOME=/root", "LogLevel=info", "NoValue"})
	want := map[string]string{
		"AutoReplayEnabled":  "false",         // the environment wins
		"LogLevel":           "info",          // the same value: not reported as overridden
		"Empty":              "kept",          // an empty variable does not replace a value (Core Tools: IsNullOrEmpty)
		"OrdersQueueName":    "orders-x",      // the file replaces the default
		"HOME":               "/root",         // the host reads its whole environment
		"LedgersQueueName":   "ledgers",       // a default
		"AccountsQueueName":  "accounts",      // a default: every registered domain's queue
		"AutoReplaySchedule": "0 */1 * * * *", // a default
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["NoValue"]; ok || len(got) != len(want) {
		t.Errorf("settings %v, want exactly %v", got, want)
	}
	if strings.Join(fromEnv, ",") != "AutoReplayEnabled" {
		t.Errorf("from the environment: %v, want [AutoReplayEnabled]", fromEnv)
	}
}

// TestReadValues: local.settings.json is optional; a file that is there
// must be valid, unencrypted, and hold strings.
func TestReadValues(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if v, found, err := readValues(filepath.Join(dir, "none.json")); err != nil || found || v != nil {
		t.Errorf("a missing file: %v %v %v", v, found, err)
	}
	v, found, err := readValues(write("ok.json", `{"IsEncrypted":false,"Values":{"AutoReplayEnabled":"false"}}`))
	if err != nil || !found || v["AutoReplayEnabled"] != "false" {
		t.Errorf("a valid file: %v %v %v", v, found, err)
	}
	for name, c := range map[string]struct{ doc, says string }{
		"bad.json":       {`{"Values":`, "bad.json"},
		"encrypted.json": {`{"IsEncrypted":true,"Values":{}}`, "IsEncrypted"},
		"number.json":    {`{"Values":{"AutoReplayMaxOrders":50}}`, "Values.AutoReplayMaxOrders is a number, want a string"},
		"bool.json":      {`{"Values":{"AutoReplayEnabled":false}}`, "Values.AutoReplayEnabled is a boolean"},
	} {
		if _, _, err := readValues(write(name, c.doc)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.says)
		}
	}
}

// TestPortFree: a taken port is refused, naming it and the PORT variable.
func TestPortFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	err = portFree(port)
	if err == nil || !strings.Contains(err.Error(), "is taken") || !strings.Contains(err.Error(), "make devhost PORT=") {
		t.Errorf("a taken port: %v", err)
	}
	l.Close()
	if err := portFree(port); err != nil {
		t.Errorf("a free port: %v", err)
	}
}
