package orders_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
)

// TestViewSaysWhichDecisionFails: an order whose next seq's decision fails
// says so on its page (the seq, the error, when); an order without says
// nothing of it (the answer is byte for byte what it was).
func TestViewSaysWhichDecisionFails(t *testing.T) {
	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	s := orders.State{Status: orders.StatusOpen, Currency: "EUR"}
	head := keyed.Head{ID: "o-1", AppliedSeq: 1, UpdatedAt: at}
	plain, _ := json.Marshal(orders.Rules{}.View(head, s, keyed.Page{}))
	if strings.Contains(string(plain), "failing") {
		t.Fatalf("an order without a failing decision: %s", plain)
	}
	head.Failing = &keyed.Failure{Seq: 2, Why: "the rules panicked: boom", At: at}
	failing, _ := json.Marshal(orders.Rules{}.View(head, s, keyed.Page{}))
	if want := `"failing":{"seq":2,"error":"the rules panicked: boom","at":"2026-11-29T08:00:00Z"}`; !strings.Contains(string(failing), want) {
		t.Fatalf("the page of an order whose seq 2 fails: %s, want %s", failing, want)
	}
}
