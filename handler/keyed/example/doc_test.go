package example_test

import (
	"os"
	"strings"
	"testing"
)

// TestDocShowsTheExample holds docs/rules.md to this package: the page's Go
// blocks are devices.go and devices_test.go, byte for byte, so that the
// example a reader copies is the one these tests compile and run.
func TestDocShowsTheExample(t *testing.T) {
	page, err := os.ReadFile("../../../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(page), "```go\n")[1:] {
		code, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatal("docs/rules.md: a Go block is not closed")
		}
		blocks = append(blocks, code)
	}
	for i, file := range []string{"devices.go", "devices_test.go"} {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(blocks) {
			t.Fatalf("docs/rules.md shows %d Go blocks, want %s as block %d", len(blocks), file, i+1)
		}
		if blocks[i] != string(want) {
			t.Errorf("docs/rules.md's Go block %d is not %s as it is: copy the file into the page", i+1, file)
		}
	}
}
