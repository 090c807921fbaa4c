package devhost

import (
	"testing"
	"time"
)

// TimeSpans as host.json writes them, the infinite one included.
func TestTimeSpan(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"00:05:00": 5 * time.Minute, "1.02:00:00": 26 * time.Hour, "00:00:00.5": 500 * time.Millisecond,
		"-00:00:00.0010000": -time.Millisecond,
	} {
		if got, err := timeSpan(in, 0); err != nil || got != want {
			t.Errorf("timeSpan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := timeSpan("5 minutes", 0); err == nil {
		t.Error("a bad TimeSpan was accepted")
	}
}
