package syncio_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/convoy-dev/convoy/handler/internal/syncio"
)

// Writes from many goroutines arrive whole, kept or passed on (run with -race).
func TestWritesArriveWhole(t *testing.T) {
	var kept syncio.Writer
	var passedTo strings.Builder
	passed := syncio.NewWriter(&passedTo)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				kept.Write([]byte("line\n"))
				passed.Write([]byte("line\n"))
			}
		}()
	}
	wg.Wait()
	want := strings.Repeat("line\n", 800)
	if kept.String() != want {
		t.Errorf("kept %d bytes, want %d", len(kept.String()), len(want))
	}
	if passedTo.String() != want || passed.String() != "" {
		t.Errorf("passed on %d bytes, want %d; kept %q", passedTo.Len(), len(want), passed.String())
	}
}
