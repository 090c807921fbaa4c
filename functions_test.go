package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/domains"
)

// TestFunctionFolders: the function folders in the repository are, byte
// for byte, what `convoy functions` writes for the registered domains, the
// order domain's included (written by hand long before the command): so
// a new domain's folders are the ones the existing domains were tested with.
func TestFunctionFolders(t *testing.T) {
	for _, d := range domains.All {
		files, err := domainFunctions(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			got, err := os.ReadFile(filepath.Join("functions", f.Name, "function.json"))
			if err != nil {
				t.Errorf("domain %s: %v (convoy functions writes it)", d.Name(), err)
				continue
			}
			if !bytes.Equal(got, f.JSON) {
				t.Errorf("functions/%s/function.json is not what convoy functions writes:\n%s\nwant:\n%s", f.Name, got, f.JSON)
			}
		}
	}
}

// TestFunctionsCommandWritesWhatIsMissing: the command writes the folders
// a domain lacks and leaves the others as they are.
func TestFunctionsCommandWritesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "OrderStatus", "function.json")
	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFunctions([]string{"--dir", dir}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(kept); string(got) != "{}\n" {
		t.Errorf("an existing function.json was rewritten: %s", got)
	}
	written, _ := filepath.Glob(filepath.Join(dir, "*", "function.json"))
	if want := 5 * len(domains.All); len(written) != want {
		t.Fatalf("%d folders, want %d (five per domain)", len(written), want)
	}
	got, err := os.ReadFile(filepath.Join(dir, "AccountProcessor", "function.json"))
	if err != nil || !strings.Contains(string(got), `"queueName": "%AccountsQueueName%"`) {
		t.Fatalf("AccountProcessor: %s, %v", got, err)
	}
}
