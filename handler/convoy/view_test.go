package convoy_test

import (
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
)

// FuzzHistoryCursor: a continuation is either refused as Invalid or names a
// cursor whose own token reads back as the same cursor, within bounds.
func FuzzHistoryCursor(f *testing.F) {
	f.Add(convoy.HistoryCursor{Tx: 1000, Rejected: -1}.Token())
	f.Add(convoy.HistoryCursor{Tx: -1, Rejected: 7}.Token())
	f.Add("aDEuMDEuMQ")
	f.Add("aDEuLTEuLTE")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := convoy.ParseHistoryCursor(token)
		if err != nil {
			if fault.CodeOf(err) != fault.Invalid {
				t.Fatalf("%q: %v is not Invalid", token, err)
			}
			return
		}
		if c.Tx < -1 || c.Rejected < -1 || (c.Tx == -1 && c.Rejected == -1) {
			t.Fatalf("%q read as %+v", token, c)
		}
		again, err := convoy.ParseHistoryCursor(c.Token())
		if err != nil || again != c {
			t.Fatalf("%q: %+v re-issued reads %+v, %v", token, c, again, err)
		}
	})
}

func TestHistoryCursorRoundTrip(t *testing.T) {
	for _, c := range []convoy.HistoryCursor{{0, 0}, {-1, 0}, {0, -1}, {1 << 62, 9_223_372_036_854_775_807}} {
		got, err := convoy.ParseHistoryCursor(c.Token())
		if err != nil || got != c {
			t.Fatalf("%+v: %+v, %v", c, got, err)
		}
	}
	for _, bad := range []string{"", "!!", convoy.HistoryCursor{Tx: -1, Rejected: -1}.Token(), convoy.HistoryCursor{Tx: -2, Rejected: 0}.Token()} {
		if _, err := convoy.ParseHistoryCursor(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
