package tablestore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// The answers below have the exact shape the Table service documents for an
// entity-group transaction and Azurite sends (captured from Azurite 3.35):
// a 202 whose multipart/mixed body holds one changeset response, which holds
// one application/http response per operation when the changeset succeeded,
// or the single response of the operation that failed it.
const answerID = "4c7f2a9e-1b3d-4e5f-8a6b-0c9d8e7f6a5b"

// answer frames responses as a batch answer with one changeset.
func answer(responses ...string) string {
	var b strings.Builder
	b.WriteString("--batchresponse_" + answerID + "\r\nContent-Type: multipart/mixed; boundary=changesetresponse_" + answerID + "\r\n\r\n")
	for _, r := range responses {
		b.WriteString("--changesetresponse_" + answerID + "\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n")
		b.WriteString(r)
	}
	b.WriteString("--changesetresponse_" + answerID + "--\r\n--batchresponse_" + answerID + "--\r\n")
	return b.String()
}

// succeeded is one operation's success response, as Azurite writes it.
const succeeded = "HTTP/1.1 204 No Content\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\n" +
	"DataServiceVersion: 3.0;\r\nETag: W/\"datetime'2026-11-25T14%3A33%3A54.1897404Z'\"\r\n\r\n\r\n"

func successes(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = succeeded
	}
	return s
}

// failed is the response of the operation (index 0) that failed a changeset,
// in the JSON form of "Performing entity group transactions", Sample error response.
func failed(status int, code, message string) string {
	return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-ID: 1\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\nDataServiceVersion: 3.0;\r\n"+
		"Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n\r\n"+
		`{"odata.error":{"code":"%s","message":{"lang":"en-US","value":"0:%s\nRequestId:8a1e6c3b-0002-0033-6f3a-9d2f4c000000\nTime:2026-11-25T14:33:54.1923456Z"}}}`+"\r\n",
		status, http.StatusText(status), code, message)
}

// stubService answers queries with no entities and every $batch with a
// 202 holding its answer; it counts the $batch requests.
type stubService struct {
	*httptest.Server
	mu      sync.Mutex
	answer  string
	batches atomic.Int64
}

func newStubService(t *testing.T) *stubService {
	s := &stubService{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json;odata=minimalmetadata;streaming=true;charset=utf-8")
			fmt.Fprint(w, `{"value":[]}`)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/$batch") {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.Path, http.StatusNotImplemented)
			return
		}
		s.batches.Add(1)
		s.mu.Lock()
		body := s.answer
		s.mu.Unlock()
		w.Header().Set("Content-Type", "multipart/mixed; boundary=batchresponse_"+answerID)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// answers makes every $batch from now on answer body.
func (s *stubService) answers(body string) {
	s.mu.Lock()
	s.answer = body
	s.mu.Unlock()
}

// stores returns the order store and the ledger store of the program, on table "t" of s.
func (s *stubService) stores(t *testing.T) (*Store, *Ledgers) {
	t.Helper()
	conn := "DefaultEndpointsProtocol=http;AccountName=" + devAccount + ";AccountKey=" + devKey + ";TableEndpoint=" + s.URL + "/" + devAccount
	svc, err := aztables.NewServiceClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	batches, err := NewBatchesFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(svc.NewClient("t"), batches.Table("t")), NewLedgers(svc.NewClient("t"))
}

// commit commits a change of four operations (marker, head, one transaction's two rows).
func commit(ctx context.Context, s *Store) error {
	o := convoy.NewKey("o-1")
	o.AppliedSeq, o.UpdatedAt = 1, time.Now()
	return s.Commit(ctx, o, 0, &convoy.Change{Writes: keyed.Writes{}.
		Append("t", 0, keyed.Props{{Name: "TxId", Value: "t-1"}, {Name: "Amount", Value: int64(5)}}).
		Insert("x", "t-1", keyed.Props{{Name: "Position", Value: int64(0)}, {Name: "Amount", Value: int64(5)}})})
}

// allocate allocates seqs: one transaction of two operations (alloc row, counter).
func allocate(ctx context.Context, l *Ledgers) error {
	_, err := l.Allocate(ctx, "L-1", "v2:aaa", "o-1", 3)
	return err
}

type outcome string

const (
	conflict  outcome = "conflict"  // commit: convoy.ErrConflict; allocation: read again and retried at once
	transient outcome = "transient" // fault.Unavailable, retried with backoff by the caller
	permanent outcome = "permanent" // fault.Internal: a bug or a misconfiguration
)

// TestChangesetErrorsClassified: the failure responses the Table service
// documents, inside the 202 answer of an entity-group transaction, are
// classified by their own status and error code, for commits and
// allocations alike. Sources:
//   - https://learn.microsoft.com/rest/api/storageservices/performing-entity-group-transactions
//     (a failed changeset answers 202 with the failing operation's response, its index in the message)
//   - https://learn.microsoft.com/rest/api/storageservices/table-service-error-codes
//   - https://learn.microsoft.com/rest/api/storageservices/common-rest-api-error-codes
//     (ServerBusy 503, OperationTimedOut 500, InternalError 500, shared by every storage service)
func TestChangesetErrorsClassified(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		status             int
		code, message      string
		commit, allocation outcome
	}{
		{503, "ServerBusy", "The server is currently unable to receive requests. Please retry your request.", transient, transient},
		{503, "ServerBusy", "Operations per second is over the account limit.", transient, transient},
		{500, "OperationTimedOut", "The operation could not be completed within the permitted time.", transient, transient},
		{500, "InternalError", "The server encountered an internal error. Please retry the request.", transient, transient},
		{409, "EntityAlreadyExists", "The specified entity already exists.", conflict, conflict},
		{412, "UpdateConditionNotSatisfied", "The update condition specified in the request was not satisfied.", conflict, conflict},
		{404, "ResourceNotFound", "The specified resource does not exist.", conflict, permanent},
		{400, "InvalidInput", "One of the request inputs is not valid.", permanent, permanent},
		{400, "InvalidDuplicateRow", "A command with RowKey 'h' is already present in the batch. An entity can appear only once in a batch.", permanent, permanent},
		{400, "EntityTooLarge", "The entity is larger than the maximum size permitted.", permanent, permanent},
		{400, "PropertyValueTooLarge", "The property value is larger than the maximum size permitted.", permanent, permanent},
	} {
		t.Run(fmt.Sprintf("%d %s", c.status, c.code), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			svc := newStubService(t)
			svc.answers(answer(failed(c.status, c.code, c.message)))
			store, ledgers := svc.stores(t)

			err := commit(ctx, store)
			check(t, "commit", err, c.code, c.commit, errors.Is(err, convoy.ErrConflict))

			svc.batches.Store(0)
			err = allocate(ctx, ledgers)
			check(t, "allocation", err, c.code, c.allocation, svc.batches.Load() > 1)
		})
	}
}

func check(t *testing.T, what string, err error, code string, want outcome, conflicted bool) {
	t.Helper()
	var got outcome
	switch {
	case err == nil:
		t.Errorf("%s succeeded; want %s", what, want)
		return
	case conflicted:
		got = conflict
	case fault.CodeOf(err) == fault.Unavailable:
		got = transient
	case fault.CodeOf(err) == fault.Internal:
		got = permanent
	}
	if got != want {
		t.Errorf("%s: %s (%s); want %s", what, got, fault.CodeOf(err), want)
	}
	if want != conflict && !strings.Contains(err.Error(), code) {
		t.Errorf("%s: the error does not name the service's code %s: %v", what, code, err)
	}
}

// TestMalformedAnswerIsTransient: a 202 is a success only with exactly one
// success response per operation (or it is the single failure response).
// Any other answer (empty, short, cut anywhere, garbage) fails the call as
// transient, saying the answer was malformed, rather than acking an effect
// that was never stored.
func TestMalformedAnswerIsTransient(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := newStubService(t)
	store, ledgers := svc.stores(t)
	for _, call := range []struct {
		what string
		ops  int
		do   func() error
	}{
		{"commit", 4, func() error { return commit(ctx, store) }},
		{"allocation", 3, func() error { return allocate(ctx, ledgers) }}, // alloc, seq and counter rows
	} {
		complete := answer(successes(call.ops)...)
		svc.answers(complete)
		if err := call.do(); err != nil {
			t.Fatalf("%s: a complete answer: %v", call.what, err)
		}
		bodies := map[string]string{
			"empty body":                  "",
			"one response for all":        answer(succeeded),
			"a response too many":         answer(successes(call.ops + 1)...),
			"no response":                 answer(),
			"a success after the failure": answer(failed(409, "EntityAlreadyExists", "x"), succeeded),
			"garbage":                     "<html><body><h1>502 Bad Gateway</h1></body></html>\r\n",
			"garbage, one line":           "\x00\xff\xfe garbage",
			"responses outside a changeset": strings.NewReplacer( // batch parts, where the changeset's should be
				"Content-Type: multipart/mixed; boundary=changesetresponse_"+answerID+"\r\n\r\n", "",
				"--changesetresponse_"+answerID+"--\r\n", "",
				"changesetresponse_", "batchresponse_").Replace(complete),
		}
		for cut := 0; cut < len(complete)-len("--\r\n"); cut++ { // every cut short of the closing delimiter
			bodies[fmt.Sprintf("cut at %d of %d bytes", cut, len(complete))] = complete[:cut]
		}
		for _, name := range slices.Sorted(maps.Keys(bodies)) {
			svc.answers(bodies[name])
			err := call.do()
			if fault.CodeOf(err) != fault.Unavailable || errors.Is(err, convoy.ErrConflict) || !strings.Contains(fmt.Sprint(err), "malformed") {
				t.Errorf("%s of %d operations, %s: %v (%s); want a transient error saying the answer was malformed", call.what, call.ops, name, err, fault.CodeOf(err))
			}
		}
	}
}
