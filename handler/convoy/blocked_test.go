package convoy

import (
	"testing"
	"time"
)

func TestBlockedEntryStale(t *testing.T) {
	since := time.Date(2026, 11, 25, 15, 0, 0, 0, time.UTC)
	e := BlockedEntry{OrderID: "o", Since: since, Version: 4}
	tests := []struct {
		name  string
		e     BlockedEntry
		h     Head
		stale bool
	}{
		{"no state yet: the blocking commit is still to come", e, Head{}, false},
		{"head below the blocking commit's version", e, Head{Version: 3}, false},
		{"blocked since the entry's time", e, Head{Version: 4, Parked: 1, BlockedSince: since}, false},
		{"still blocked by it, later commits on", e, Head{Version: 9, Parked: 2, BlockedSince: since}, false},
		{"the blocking commit lost to another", e, Head{Version: 4}, true},
		{"unblocked since", e, Head{Version: 7}, true},
		{"blocked again since another time", e, Head{Version: 8, Parked: 1, BlockedSince: since.Add(time.Hour)}, true},
		{"an entry of an earlier release, the order gone", BlockedEntry{Since: since}, Head{}, true},
	}
	for _, tt := range tests {
		if got := tt.e.Stale(tt.h); got != tt.stale {
			t.Errorf("%s: Stale = %v, want %v", tt.name, got, tt.stale)
		}
	}
}
