package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/schedule"
)

func TestNext(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 20, 30, 500, time.UTC) // a Saturday
	for _, c := range []struct{ expr, want string }{
		{"* * * * * *", "2026-11-21T10:20:31Z"},
		{"*/15 * * * * *", "2026-11-21T10:20:45Z"},
		{"0 */5 * * * *", "2026-11-21T10:25:00Z"},
		{"0 0 * * * *", "2026-11-21T11:00:00Z"},
		{"0 30 9 * * 1-5", "2026-11-23T09:30:00Z"},
		{"0 30 9 * * Mon", "2026-11-23T09:30:00Z"},
		{"0 0 0 1 Jan *", "2027-01-01T00:00:00Z"},
		{"5,10 20 10 21 11 *", "2027-11-21T10:20:05Z"},
		{"5,10 21 10 21 11 *", "2026-11-21T10:21:05Z"},
		{"0 0 0 * * 7", "2026-11-22T00:00:00Z"},
		{"10-20/5 * * * * *", "2026-11-21T10:21:10Z"},
		{"30-40/5 * * * * *", "2026-11-21T10:20:35Z"},
	} {
		s, err := schedule.Parse(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got, err := s.Next(at)
		if err != nil || got.Format(time.RFC3339) != c.want {
			t.Errorf("%s: next after %s is %s (%v), want %s", c.expr, at.Format(time.RFC3339), got.Format(time.RFC3339), err, c.want)
		}
		if !s.Matches(got) {
			t.Errorf("%s: does not match its own next occurrence %s", c.expr, got)
		}
	}
}

func TestRefused(t *testing.T) {
	for expr, want := range map[string]string{
		"":                       "6 fields",
		"* * * * *":              "want six",
		"00:05:00":               "TimeSpan",
		"60 * * * * *":           "from 0 to 59",
		"* * 24 * * *":           "from 0 to 23",
		"* * * 0 * *":            "from 1 to 31",
		"*/0 * * * * *":          "step",
		"5-1 * * * * *":          "ends before",
		"a * * * * *":            "not a value",
		"* * * * Foo *":          "not a value",
		strings.Repeat("*", 300): "longer",
	} {
		_, err := schedule.Parse(expr)
		if err == nil || !strings.Contains(err.Error(), want) {
			if want == "6 fields" && err != nil {
				continue
			}
			t.Errorf("%q: %v, want an error saying %q", expr, err, want)
		}
	}
	s, _ := schedule.Parse("0 0 0 31 2 *")
	if _, err := s.Next(time.Now()); err != schedule.ErrNever {
		t.Errorf("31 February: %v, want ErrNever", err)
	}
}

// FuzzParse: any input either fails with an error or gives a schedule whose
// next occurrence matches it and lies after the start.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0 */5 * * * *", "* * * * * *", "0 30 9 * * Mon-Fri", "1,2,3-9/2 * * 1 Jan 0", "00:05:00", "*/0 * * * * *"} {
		f.Add(s)
	}
	at := time.Date(2026, 11, 21, 10, 20, 30, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string) {
		s, err := schedule.Parse(expr)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		next, err := s.Next(at)
		if err == schedule.ErrNever {
			return
		}
		if err != nil || !next.After(at) || !s.Matches(next) {
			t.Fatalf("%q: next %s, %v", expr, next, err)
		}
	})
}
