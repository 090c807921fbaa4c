package ledger

import (
	"testing"
	"unsafe"
)

// TestEntryIsSmall: a ledger keeps up to a million entries
// (BenchmarkPublisherScale), each two indexes and its mark; its key and
// command kept beside it (a string, a boxed command) took 56 bytes.
func TestEntryIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(entry{}); size > 12 {
		t.Fatalf("an entry takes %d bytes, more than 12", size)
	}
}
