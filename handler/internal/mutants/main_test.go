package main

import (
	"path/filepath"
	"testing"
)

// TestListIsCurrent is make mutants -n within make test: every mutant's
// original is still found, once, in its file. Code that moves then fails
// the build here, instead of leaving the mutation table stale until the
// next make mutants.
func TestListIsCurrent(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := load(root, "handler/internal/mutants/mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no mutants in the list")
	}
}
