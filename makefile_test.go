package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// standInAz is an `az` that answers `account show`, and `servicebus queue
// show` with $AZ_SHOW_OUT on stdout, $AZ_SHOW_ERR on stderr and exit status
// $AZ_SHOW_EXIT, as the real CLI does (warnings go to stderr); it records
// every call in $AZ_CALLS.
const standInAz = `#!/bin/sh
echo "$*" >> "$AZ_CALLS"
case "$*" in
  "account show"*) exit 0 ;;
  "servicebus queue show"*) printf '%s' "$AZ_SHOW_ERR" >&2; printf '%b' "$AZ_SHOW_OUT"; exit "$AZ_SHOW_EXIT" ;;
  "servicebus queue delete"*) exit 0 ;;
esac
echo "stand-in az: unexpected call: $*" >&2; exit 2
`

// TestMigrateLedgersReadsOnlyTheAnswer runs `make migrate-ledgers` against a
// stand-in az: a warning on stderr (the CLI prints them there, e.g. about
// its own version) must not be read as the queue's properties.
func TestMigrateLedgersReadsOnlyTheAnswer(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed")
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "az"), []byte(standInAz), 0o755); err != nil {
		t.Fatal(err)
	}
	const warning = "WARNING: You have 2 update(s) available. Consider updating your CLI installation with 'az upgrade'\n"
	cases := []struct {
		name, out, errs, exit string
		wantOK                bool
		wantSaid              string
		wantDelete            bool
	}{
		{"sessionless and drained, with a warning", `false\t0\t0\t0\n`, warning, "0", true, "deleted; now make provision", true},
		{"already session-enabled, with a warning", `true\t0\t0\t0\n`, warning, "0", true, "already session-enabled", false},
		{"sessionless with messages left", `false\t2\t0\t1\n`, warning, "0", false, "still holds 2 active, 0 dead-lettered and 1 scheduled", false},
		{"no such queue", ``, "ERROR: (ResourceNotFound) The Resource 'ledgers' was not found.\n", "3", true, "nothing to migrate", false},
		{"an answer of another shape", `{"error": "?"}\n`, warning, "0", false, "unexpected answer from az servicebus queue show", false},
		{"az fails otherwise", ``, "ERROR: AuthorizationFailed\n", "1", false, "could not read the ledgers queue", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls")
			cmd := exec.Command("make", "--no-print-directory", "migrate-ledgers", "RG=rg-convoy", "SB=sb-convoy.servicebus.windows.net")
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"AZ_CALLS="+calls, "AZ_SHOW_OUT="+c.out, "AZ_SHOW_ERR="+c.errs, "AZ_SHOW_EXIT="+c.exit)
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.wantOK || !strings.Contains(string(out), c.wantSaid) {
				t.Fatalf("make migrate-ledgers: %v\n%s\nwant success %v and %q", err, out, c.wantOK, c.wantSaid)
			}
			made, _ := os.ReadFile(calls)
			if deleted := strings.Contains(string(made), "servicebus queue delete -g rg-convoy --namespace-name sb-convoy -n ledgers"); deleted != c.wantDelete {
				t.Fatalf("queue deleted: %v, want %v; az calls:\n%s", deleted, c.wantDelete, made)
			}
		})
	}
}
