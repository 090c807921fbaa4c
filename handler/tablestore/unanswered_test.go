package tablestore

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// TestPointReadsWithoutAnAnswer: a point read that got no answer at all (the
// connection refused, so no status and no error code) is a transient error,
// not the answer of a row that is there: IsParked once said true, and so
// made a message a duplicate, and GetLedger and Row (then Tx) failed decoding an empty
// body, as if the row were corrupt.
func TestPointReadsWithoutAnAnswer(t *testing.T) {
	t.Parallel()
	conn := "DefaultEndpointsProtocol=http;AccountName=" + devAccount + ";AccountKey=" + devKey + ";TableEndpoint=http://127.0.0.1:1/" + devAccount
	svc, err := aztables.NewServiceClientFromConnectionString(conn, ClientOptions(policy.RetryOptions{MaxRetries: -1}))
	if err != nil {
		t.Fatal(err)
	}
	s, l := New(svc.NewClient("t"), nil), NewLedgers(svc.NewClient("t"))
	ctx := context.Background()
	transient := func(what string, err error) {
		t.Helper()
		if !fault.IsTransient(err) {
			t.Errorf("%s: %v, want a transient error", what, err)
		}
	}
	parked, err := s.IsParked(ctx, "o-1", 1)
	if parked {
		t.Error("IsParked: true without an answer")
	}
	transient("IsParked", err)
	_, err = l.GetLedger(ctx, "L-1")
	transient("GetLedger", err)
	_, found, err := s.Row(ctx, "o-1", keyed.RowRef{Collection: "x", ID: "t-1"})
	if found {
		t.Error("Row: found without an answer")
	}
	transient("Row", err)
}
