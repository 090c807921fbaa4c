// Package golden compares what the code produces with a file committed
// under the package's testdata/golden/, the compatibility goldens of
// issue 43 (what is stored, sent or answered must not change). With the
// -update flag the tests rewrite the files instead:
//
//	go test ./handler/tablestore -run TestGolden -update
//
// make test never passes it. Test code only.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/* from what the code produces today")

// Updating reports whether the files are being rewritten (-update): a test
// then checks nothing against them.
func Updating() bool { return *update }

// Marshal is v as a golden file holds it: indented JSON, without HTML
// escaping, with a final newline.
func Marshal(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Read returns testdata/golden/name.
func Read(t *testing.T, name string) []byte {
	t.Helper()
	want, err := os.ReadFile(path(name))
	if err != nil {
		t.Fatalf("%v (write it with -update)", err)
	}
	return want
}

// Check compares got, JSON, with testdata/golden/name, or rewrites the file
// with -update; a difference fails the test at its first differing line.
func Check(t *testing.T, name string, got []byte) {
	t.Helper()
	if !json.Valid(got) {
		t.Fatalf("what the code produced for %s is not valid JSON:\n%s", name, got)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path(name), got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := Read(t, name)
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		g, w := "", ""
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs from what the code produces today, first at line %d:\n got: %s\nwant: %s\n(issue 43: what is stored, sent or answered must not change)", path(name), i+1, g, w)
		}
	}
}

func path(name string) string { return filepath.Join("testdata", "golden", name) }
