package tablestore

import (
	"bufio"
	"encoding/json"
	"mime"
	"mime/multipart"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// The entity JSON the batch writer produces decodes, with the SDK's own
// EDMEntity, to what the SDK's encoding of the same values decodes to.
func TestEntityJSONAsTheSDKWritesIt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 3, 4, 5, 123456700, time.UTC)
	b := (&Batches{endpoint: "https://acct.table.core.windows.net", table: "orders"}).newBody()
	e := b.upsert("o-1'x", "h")
	e.i32("Parked", 3)
	e.str("Status", "open \"quoted\" \\ <tag> \u2028 é\n")
	e.bool("Complete", true)
	e.i64("AppliedSeq", 1<<53+1)
	e.time("UpdatedAt", at)
	e.props(keyed.Props{{Name: "Data", Value: `{"a":[1,2]}`}})
	e.end()
	ours := entityOf(t, b.close(), 0)

	sdk, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: "o-1'x", RowKey: "h"}, Properties: map[string]any{
		"Parked": int32(3), "Status": "open \"quoted\" \\ <tag> \u2028 é\n", "Complete": true,
		"AppliedSeq": aztables.EDMInt64(1<<53 + 1), "UpdatedAt": aztables.EDMDateTime(at), "Data": `{"a":[1,2]}`,
	}})
	var want, got aztables.EDMEntity
	if err := json.Unmarshal(sdk, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ours, &got); err != nil {
		t.Fatalf("our entity %s: %v", ours, err)
	}
	// The SDK's encoder doubles single quotes in keys (for URLs); the body keeps them.
	want.PartitionKey = "o-1'x"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n got %+v\nwant %+v", got, want)
	}
}

// The body is the multipart/mixed changeset the Table service documents:
// one application/http part per operation, keys quoted in URLs.
func TestBatchBodyShape(t *testing.T) {
	t.Parallel()
	b := (&Batches{endpoint: "http://127.0.0.1:10002/devstoreaccount1", table: "t1"}).newBody()
	b.insert("o-1", "v:1").end()
	b.upsert("o-1", "h").end()
	b.delete("o'1", "p:2")
	body := b.close()
	mr := multipart.NewReader(strings.NewReader(string(body)), b.batch)
	outer, err := mr.NextPart()
	if err != nil {
		t.Fatal(err)
	}
	_, params, _ := mime.ParseMediaType(outer.Header.Get("Content-Type"))
	inner := multipart.NewReader(outer, params["boundary"])
	var lines []string
	for {
		p, err := inner.NextPart()
		if err != nil {
			break
		}
		if p.Header.Get("Content-Type") != "application/http" {
			t.Fatalf("part Content-Type %q", p.Header.Get("Content-Type"))
		}
		req, err := http.ReadRequest(bufioReader(p))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, req.Method+" "+req.URL.String()+" "+req.Header.Get("If-Match"))
	}
	want := []string{
		"POST http://127.0.0.1:10002/devstoreaccount1/t1 ",
		"PUT http://127.0.0.1:10002/devstoreaccount1/t1(PartitionKey='o-1',RowKey='h') ",
		"DELETE http://127.0.0.1:10002/devstoreaccount1/t1(PartitionKey='o%27%271',RowKey='p:2') *", // quotes doubled (OData), then path-escaped
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("operations\n got %q\nwant %q", lines, want)
	}
}

func TestParseConnectionString(t *testing.T) {
	t.Parallel()
	for conn, want := range map[string]connectionString{
		"UseDevelopmentStorage=true": {devAccount, devKey, "http://127.0.0.1:10002/devstoreaccount1"},
		"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.chinacloudapi.cn": {
			"acct", "a2V5", "https://acct.table.core.chinacloudapi.cn"},
		"AccountName=acct;AccountKey=a2V5": {"acct", "a2V5", "https://acct.table.core.windows.net"},
		"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:1234/devstoreaccount1;": {
			"devstoreaccount1", "a2V5", "http://127.0.0.1:1234/devstoreaccount1"},
	} {
		got, err := parseConnectionString(conn)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", conn, got, err, want)
		}
	}
	if _, err := NewBatchesFromConnectionString("TableEndpoint=https://acct.table.core.windows.net;SharedAccessSignature=sv=x;AccountName=acct", nil); err == nil {
		t.Error("a SAS connection string was accepted")
	}
}

// entityOf returns the JSON body of operation i of a batch body.
func entityOf(t *testing.T, body []byte, i int) []byte {
	t.Helper()
	parts := strings.Split(string(body), "Content-Type: application/json\r\n\r\n")
	if len(parts) < i+2 {
		t.Fatalf("no operation %d in %s", i, body)
	}
	return []byte(strings.SplitN(parts[i+1], "\r\n", 2)[0])
}

func bufioReader(r interface{ Read([]byte) (int, error) }) *bufio.Reader { return bufio.NewReader(r) }
