package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/settings"
)

// TestHelp: help, -h, -help and --help, for the program and for each
// command, print that help on stdout and exit 0 without starting anything,
// even with every setting serve needs present (the port it would listen on
// stays free); each command's help names the settings it reads.
func TestHelp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	t.Setenv("FUNCTIONS_CUSTOMHANDLER_PORT", strconv.Itoa(port))
	t.Setenv("ServiceBusConnection", "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;")
	t.Setenv("StateStorage", storage)
	settingsOf := map[string][]string{
		"":        {"publish", "replay", "skip", "local.settings.json"},
		"serve":   {"FUNCTIONS_CUSTOMHANDLER_PORT", "ServiceBusConnection", "ServiceBusConnection__fullyQualifiedNamespace", "StateStorage", "StateStorage__tableServiceUri", "AutoReplayEnabled"},
		"publish": {"ServiceBusConnection", "ServiceBusConnection__fullyQualifiedNamespace", "StateStorage", "StateStorage__tableServiceUri", "LedgersQueueName", "OrdersQueueName", "--direct", "--stream", "--settings"},
		"replay":  {"ServiceBusConnection", "StateStorage", "StateStorage is required", "OrdersQueueName", "OrdersTableName", "ReplayScanLimit", "--all", "--max", "--settings"},
		"skip":    {"StateStorage", "StateStorage__tableServiceUri", "OrdersTableName", "--settings"},
	}
	for _, c := range []struct {
		args  []string
		topic string
	}{
		{[]string{"-h"}, ""}, {[]string{"--help"}, ""}, {[]string{"-help"}, ""}, {[]string{"help"}, ""},
		{[]string{"help", "publish"}, "publish"}, {[]string{"publish", "-h"}, "publish"}, {[]string{"publish", "--stream", "s", "--help", "x.json"}, "publish"},
		{[]string{"replay", "--help"}, "replay"}, {[]string{"replay", "--all", "-h"}, "replay"}, {[]string{"help", "replay"}, "replay"},
		{[]string{"skip", "-h"}, "skip"}, {[]string{"skip", "o-1", "2", "--help"}, "skip"},
		{[]string{"serve", "-h"}, "serve"}, {[]string{"help", "serve"}, "serve"},
	} {
		out, code := runCaptured(t, c.args...)
		if code != 0 || !strings.HasPrefix(out, "usage: convoy") {
			t.Errorf("convoy %v: exit %d, output %q", c.args, code, out)
			continue
		}
		if c.topic != "" && !strings.Contains(firstLine(out), c.topic) {
			t.Errorf("convoy %v: %q is not the help of %s", c.args, firstLine(out), c.topic)
		}
		for _, s := range settingsOf[c.topic] {
			if !strings.Contains(out, s) {
				t.Errorf("convoy %v: the help does not name %s", c.args, s)
			}
		}
		if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			conn.Close()
			t.Fatalf("convoy %v: something listens on FUNCTIONS_CUSTOMHANDLER_PORT", c.args)
		}
	}
	// Help of nothing, and a wrong command line, are errors (exit 2), on stderr.
	for _, args := range [][]string{{"help", "nope"}, {"nope"}, {"replay"}, {"skip", "o-1"}, {"skip", "o-1", "x"}, {"skip", "bad id", "2"},
		{"replay", "--max", "3", "o-1"}, {"replay", "--all", "o-1"}, {"replay", "--nope"}, {"publish"}} {
		if out, code := runCaptured(t, args...); code != 2 || out != "" {
			t.Errorf("convoy %v: exit %d, stdout %q; want 2 and nothing on stdout", args, code, out)
		}
	}
}

// runCaptured runs the command line in this process, with its stdout
// captured; it fails the test when the command has not returned in 10 s
// (serve started).
func runCaptured(t *testing.T, args ...string) (string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout = w
	os.Stderr, _ = os.Open(os.DevNull)
	done := make(chan int, 1)
	go func() { done <- run(args) }()
	var code int
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		os.Stdout, os.Stderr = stdout, stderr
		t.Fatalf("convoy %v did not return: it started something", args)
	}
	os.Stdout, os.Stderr = stdout, stderr
	w.Close()
	out, _ := io.ReadAll(r)
	return string(out), code
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestSayWhileWaiting: a command that waits past waitNotice says what it
// waits for; one that is done before says nothing.
func TestSayWhileWaiting(t *testing.T) {
	defer func(d time.Duration) { waitNotice = d }(waitNotice)
	waitNotice = 20 * time.Millisecond
	var quick strings.Builder
	sayWhileWaitingTo(&quick, "quick")()
	var slow syncBuffer
	done := sayWhileWaitingTo(&slow, "o-1: reading the dead letters of queue orders")
	deadline := time.Now().Add(10 * time.Second)
	for slow.String() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	done()
	if quick.String() != "" || !strings.HasPrefix(slow.String(), "o-1: reading the dead letters of queue orders … (waiting") {
		t.Fatalf("done at once said %q; waiting said %q", quick.String(), slow.String())
	}
}

// TestHelpDefaultsAreTheLoadersOwn: every "Setting (value)" the help gives as a
// default is what the settings loader uses when the setting is absent.
func TestHelpDefaultsAreTheLoadersOwn(t *testing.T) {
	cfg, err := settings.LoadForClient(func(k string) (string, bool) {
		if k == "ServiceBusConnection" {
			return "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;", true
		}
		return "", false
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]string{
		"LedgersQueueName": cfg.LedgersQueue, "LedgersTableName": cfg.LedgersTable,
		"ReplayScanLimit": strconv.Itoa(cfg.ReplayScanLimit), "TransientRetrySeconds": strconv.Itoa(int(cfg.RetryBudget / time.Second)),
	}
	for _, d := range cfg.Domains {
		loaded[settings.QueueSetting(d.Rules)], loaded[settings.TableSetting(d.Rules)] = d.Queue, d.Table
	}
	given := regexp.MustCompile(`([A-Z][A-Za-z]+) \(([^) ]+)\)`)
	checked := 0
	for topic, text := range helps {
		for _, m := range given.FindAllStringSubmatch(text, -1) {
			want, known := loaded[m[1]]
			if !known {
				continue
			}
			checked++
			if m[2] != want {
				t.Errorf("help %q gives %s (%s); the loader's default is %s", topic, m[1], m[2], want)
			}
		}
	}
	if checked < 6 {
		t.Fatalf("only %d defaults found in the help", checked)
	}
}
