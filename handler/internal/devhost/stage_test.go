package devhost_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// TestStageLaysOutTheApp: what `make stage` publishes, file by file, copied
// as written; a stage empties its directory first, and refuses a directory
// that holds the project.
func TestStageLaysOutTheApp(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "convoy")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "dist")
	if err := os.MkdirAll(filepath.Join(dir, "Removed"), 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := devhost.Stage(root, bin, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	functions, _ := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	if n != len(functions) || n == 0 {
		t.Errorf("staged %d functions, the project has %d", n, len(functions))
	}
	same := func(from, to string) {
		t.Helper()
		want, _ := os.ReadFile(from)
		got, err := os.ReadFile(to)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not %s as written (%v)", to, from, err)
		}
	}
	same(filepath.Join(root, "host.json"), filepath.Join(dir, "host.json"))
	same(bin, filepath.Join(dir, "convoy"))
	for _, f := range functions {
		same(f, filepath.Join(dir, filepath.Base(filepath.Dir(f)), "function.json"))
	}
	if ignore, _ := os.ReadFile(filepath.Join(dir, ".funcignore")); string(ignore) != "local.settings.json\n.funcignore\n" {
		t.Errorf(".funcignore is %q", ignore)
	}
	if _, err := os.Stat(filepath.Join(dir, "Removed")); !os.IsNotExist(err) {
		t.Errorf("a directory of an earlier stage survived: %v", err)
	}
	// A project of its own, so that a stage that did empty its parent
	// would delete only the test's files.
	parent := t.TempDir()
	project := filepath.Join(parent, "project")
	if err := os.MkdirAll(filepath.Join(project, "functions", "F"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"host.json", filepath.Join("functions", "F", "function.json")} {
		if err := os.WriteFile(filepath.Join(project, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, into := range []string{parent, project} {
		if _, err := devhost.Stage(project, bin, into, nil); err == nil {
			t.Errorf("staged into %s, which holds the project", into)
		}
	}
	if _, err := os.Stat(filepath.Join(project, "host.json")); err != nil {
		t.Fatalf("the project is gone: %v", err)
	}
}
