package tablestore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/google/uuid"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// maxGroupOps is the most operations the Table service takes in one
// entity-group transaction (its limit: a larger one is refused whole).
const maxGroupOps = 100

// batchVersion is the Table service version the $batch body is written for
// (x-ms-version): the one whose request and response formats newBody and
// changesetOutcome follow.
const batchVersion = "2019-02-02"

// Batches submits entity-group transactions as one $batch request whose body
// it writes itself, through an azcore pipeline configured as aztables
// configures its own (same retry defaults, same authentication). Why: for
// each action aztables.SubmitTransaction decodes the entity JSON it was
// given into a map, encodes it again through a generated request and a
// multipart writer, which was about a third of the handler's CPU per message
// (README, Performance). The request is the one the Table service documents
// ("Performing entity group transactions"), and aztables still does
// everything else (queries, tables, errors).
type Batches struct {
	pipeline runtime.Pipeline
	endpoint string // the table service endpoint, without a trailing slash
	table    string
}

// Table returns the Batches of one table.
func (b *Batches) Table(name string) *Batches {
	t := *b
	t.table = name
	return &t
}

// NewBatches submits to the table service at endpoint with an Entra ID
// credential (the identity-based StateStorage__tableServiceUri).
func NewBatches(endpoint string, cred azcore.TokenCredential, opts *azcore.ClientOptions) *Batches {
	auth := runtime.NewBearerTokenPolicy(cred, []string{"https://storage.azure.com/.default"}, nil)
	return newBatches(endpoint, auth, opts)
}

// NewBatchesFromConnectionString submits with the account key of a Storage
// connection string (Azurite, UseDevelopmentStorage=true, or an account key).
// opts are the same client options as the aztables client's (a transport).
func NewBatchesFromConnectionString(conn string, opts *azcore.ClientOptions) (*Batches, error) {
	cs, err := parseConnectionString(conn)
	if err != nil {
		return nil, err
	}
	if cs.key == "" {
		return nil, errors.New("StateStorage: the connection string has no AccountKey (a SAS is not supported: use the identity-based StateStorage__tableServiceUri)")
	}
	key, err := base64.StdEncoding.DecodeString(cs.key)
	if err != nil {
		return nil, fmt.Errorf("StateStorage: AccountKey is not base64: %w", err)
	}
	return newBatches(cs.endpoint, sharedKeyLite{account: cs.account, key: key}, opts), nil
}

func newBatches(endpoint string, auth policy.Policy, opts *azcore.ClientOptions) *Batches {
	pl := runtime.NewPipeline("convoy-tablestore", "v1", runtime.PipelineOptions{PerRetry: []policy.Policy{auth}}, opts)
	return &Batches{pipeline: pl, endpoint: strings.TrimSuffix(endpoint, "/")}
}

// batchBody writes the multipart body of one changeset, action by action.
type batchBody struct {
	buf       bytes.Buffer
	batch     string // boundaries
	changeset string
	tableURL  string // <endpoint>/<table>
	ops       int    // operations written
}

func (b *Batches) newBody() *batchBody {
	id := uuid.New()
	body := &batchBody{batch: "batch_" + id.String(), changeset: "changeset_" + id.String(), tableURL: b.endpoint + "/" + url.PathEscape(b.table)}
	body.buf.Grow(2048)
	body.line("--", body.batch)
	body.line("Content-Type: multipart/mixed; boundary=", body.changeset, "\r\n")
	return body
}

// op starts one operation: method, the entity's URL (keys escaped as in an
// OData key), and headers; the caller writes the entity's JSON, if any.
func (b *batchBody) op(method, pk, rk string, extra string) *entityJSON {
	w := &b.buf
	b.ops++
	b.line("--", b.changeset)
	b.line("Content-Transfer-Encoding: binary")
	b.line("Content-Type: application/http", "\r\n")
	if method == http.MethodPost {
		b.line("POST ", b.tableURL, " HTTP/1.1")
	} else {
		b.line(method, " ", b.tableURL, "(PartitionKey='", url.PathEscape(escape(pk)), "',RowKey='", url.PathEscape(escape(rk)), "') HTTP/1.1")
	}
	w.WriteString("Accept: application/json;odata=minimalmetadata\r\nDataServiceVersion: 3.0\r\n")
	w.WriteString(extra)
	if method == http.MethodDelete {
		w.WriteString("\r\n\r\n") // the end of the headers, an empty body, the delimiter's line break
		return nil
	}
	w.WriteString("Content-Type: application/json\r\n\r\n")
	e := &entityJSON{w: w}
	e.str("PartitionKey", pk)
	e.str("RowKey", rk)
	return e
}

// line writes parts and a line break.
func (b *batchBody) line(parts ...string) {
	for _, p := range parts {
		b.buf.WriteString(p)
	}
	b.buf.WriteString("\r\n")
}

// Operations of an entity-group transaction.
func (b *batchBody) insert(pk, rk string) *entityJSON {
	return b.op(http.MethodPost, pk, rk, "Prefer: return-no-content\r\n")
}
func (b *batchBody) upsert(pk, rk string) *entityJSON { return b.op(http.MethodPut, pk, rk, "") }

// merge updates an entity that must exist, keeping the properties not written.
func (b *batchBody) merge(pk, rk string) *entityJSON { return b.op("MERGE", pk, rk, "If-Match: *\r\n") }
func (b *batchBody) delete(pk, rk string)            { b.op(http.MethodDelete, pk, rk, "If-Match: *\r\n") }

func (b *batchBody) close() []byte {
	b.line("--", b.changeset, "--\r\n")
	b.line("--", b.batch, "--")
	return b.buf.Bytes()
}

// entityJSON writes one entity's properties, with the OData type annotations
// aztables.EDMEntity writes for the same Go values.
type entityJSON struct {
	w    *bytes.Buffer
	more bool
}

func (e *entityJSON) key(k string) {
	if e.more {
		e.w.WriteByte(',')
	} else {
		e.w.WriteByte('{')
		e.more = true
	}
	e.w.Write(strconv.AppendQuote(e.w.AvailableBuffer(), k))
	e.w.WriteByte(':')
}

func (e *entityJSON) str(k, v string) {
	e.key(k)
	writeJSONString(e.w, v)
}

func (e *entityJSON) typed(k, v, edm string) {
	e.str(k, v)
	e.str(k+"@odata.type", edm)
}

func (e *entityJSON) i64(k string, v int64) { e.typed(k, strconv.FormatInt(v, 10), "Edm.Int64") }
func (e *entityJSON) time(k string, t time.Time) {
	e.typed(k, t.UTC().Format("2006-01-02T15:04:05.9999999Z"), "Edm.DateTime")
}

func (e *entityJSON) i32(k string, v int32) {
	e.key(k)
	e.w.Write(strconv.AppendInt(e.w.AvailableBuffer(), int64(v), 10))
}

func (e *entityJSON) bool(k string, v bool) {
	e.key(k)
	e.w.Write(strconv.AppendBool(e.w.AvailableBuffer(), v))
}

// props adds a domain's properties, each with its type.
func (e *entityJSON) props(p keyed.Props) {
	for _, q := range p {
		switch v := q.Value.(type) {
		case string:
			e.str(q.Name, v)
		case int64:
			e.i64(q.Name, v)
		case int32:
			e.i32(q.Name, v)
		case bool:
			e.bool(q.Name, v)
		case time.Time:
			e.time(q.Name, v)
		}
	}
}

func (e *entityJSON) end() { e.w.WriteString("}\r\n") }

// writeJSONString writes s as a JSON string (what encoding/json writes,
// without HTML escaping, which the service does not need).
func writeJSONString(w *bytes.Buffer, s string) {
	w.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			w.WriteByte('\\')
			w.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(w, `\u%04x`, c)
		default:
			w.WriteByte(c)
		}
	}
	w.WriteByte('"')
}

// submit sends the changeset and returns its outcome (changesetOutcome).
func (b *Batches) submit(ctx context.Context, body *batchBody) error {
	req, err := runtime.NewRequest(ctx, http.MethodPost, b.endpoint+"/$batch")
	if err != nil {
		return err
	}
	req.Raw().Header.Set("x-ms-version", batchVersion)
	req.Raw().Header.Set("DataServiceVersion", "3.0")
	req.Raw().Header.Set("Accept", "application/json;odata=minimalmetadata")
	data := body.close()
	if err := req.SetBody(streaming.NopCloser(bytes.NewReader(data)), "multipart/mixed; boundary="+body.batch); err != nil {
		return err
	}
	resp, err := b.pipeline.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return changesetOutcome(resp, body.ops)
}

// submitTransaction submits actions through aztables and takes its outcome
// from the answer, as submit does: aztables v1.4.1 takes a 202 with too few
// responses, or cut short, for a success, and panics on one without a line
// break (getBoundaryName).
func submitTransaction(ctx context.Context, table *aztables.Client, actions []aztables.TransactionAction) (err error) {
	var resp *http.Response
	defer func() {
		if resp != nil { // the service answered: its answer decides, whatever aztables made of it
			_ = recover()
			err = changesetOutcome(resp, len(actions))
		}
	}()
	_, err = table.SubmitTransaction(policy.WithCaptureResponse(ctx, &resp), actions, nil)
	return err
}

// changesetOutcome reads the answer to an entity-group transaction of ops
// operations ("Performing entity group transactions"): a 202 whose
// multipart/mixed body holds one changeset, which holds one success response
// per operation, or only the response of the operation that failed the
// changeset. That failure is returned as if the operation had been sent
// alone (its own status and error code, which classify and tableCode read).
// Any other 202 answer (empty, cut short, too few or too many responses,
// garbled) fails as transient: an effect is taken as stored only when the
// service said so for every operation.
func changesetOutcome(resp *http.Response, ops int) error {
	if resp.StatusCode != http.StatusAccepted {
		return runtime.NewResponseError(resp)
	}
	responses, err := changesetResponses(resp)
	if err == nil {
		switch failed := failures(responses); {
		case failed == 1 && len(responses) == 1:
			return runtime.NewResponseError(responses[0])
		case failed == 0 && len(responses) == ops:
			return nil
		default:
			err = fmt.Errorf("%d responses (%d failed) for %d operations", len(responses), failed, ops)
		}
	}
	return fault.Wrap(fault.Unavailable, err, "the $batch answer was malformed")
}

// failures counts the responses that are not a success.
func failures(responses []*http.Response) int {
	n := 0
	for _, r := range responses {
		if r.StatusCode < 200 || r.StatusCode > 299 {
			n++
		}
	}
	return n
}

// changesetResponses returns the responses of a batch answer that holds
// exactly one changeset, complete to its closing delimiters.
func changesetResponses(resp *http.Response) ([]*http.Response, error) {
	body, err := runtime.Payload(resp) // the pipeline has read it already
	if err != nil {
		return nil, err
	}
	batch, err := multipartOf(resp.Header.Get("Content-Type"), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("the answer: %w", err)
	}
	changeset, err := batch.NextPart()
	if err != nil {
		return nil, fmt.Errorf("no changeset: %w", err)
	}
	parts, err := multipartOf(changeset.Header.Get("Content-Type"), changeset)
	if err != nil {
		return nil, fmt.Errorf("the changeset: %w", err)
	}
	var responses []*http.Response
	for {
		part, err := parts.NextPart()
		if err == io.EOF { // only after the closing delimiter (a cut answer is another error, which wraps io.EOF)
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the changeset after %d responses: %w", len(responses), err)
		}
		r, err := http.ReadResponse(bufio.NewReader(part), resp.Request)
		if err != nil {
			return nil, fmt.Errorf("response %d: %w", len(responses)+1, err)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, fmt.Errorf("response %d: %w", len(responses)+1, err)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		responses = append(responses, r)
	}
	if _, err := batch.NextPart(); err != io.EOF {
		return nil, fmt.Errorf("after the changeset: want the end of the answer, got %v", err)
	}
	return responses, nil
}

// multipartOf reads r as the multipart/mixed body that contentType announces.
func multipartOf(contentType string, r io.Reader) (*multipart.Reader, error) {
	media, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, err
	}
	if media != "multipart/mixed" || params["boundary"] == "" {
		return nil, fmt.Errorf("content type %q, want multipart/mixed with a boundary", contentType)
	}
	return multipart.NewReader(r, params["boundary"]), nil
}

// sharedKeyLite signs requests with a storage account key, as the Table
// service's "SharedKeyLite" scheme defines (and aztables' shared key policy
// does): HMAC-SHA256 over the date and the canonicalized resource.
type sharedKeyLite struct {
	account string
	key     []byte
}

func (s sharedKeyLite) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	date := time.Now().UTC().Format(http.TimeFormat)
	raw.Header.Set("x-ms-date", date)
	resource := "/" + s.account + raw.URL.EscapedPath()
	if comp := raw.URL.Query().Get("comp"); comp != "" {
		resource += "?comp=" + comp
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(date + "\n" + resource))
	raw.Header.Set("Authorization", "SharedKeyLite "+s.account+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return req.Next()
}

// connectionString is what Batches needs of a Storage connection string.
type connectionString struct{ account, key, endpoint string }

// The development storage account, public and the same everywhere.
const (
	devAccount = "devstoreaccount1"
	devKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

func parseConnectionString(conn string) (connectionString, error) {
	kv := map[string]string{}
	for _, part := range strings.Split(conn, ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok {
			kv[strings.ToLower(k)] = v
		}
	}
	if strings.EqualFold(kv["usedevelopmentstorage"], "true") {
		proxy := "http://127.0.0.1"
		if p := kv["developmentstorageproxyuri"]; p != "" {
			proxy = strings.TrimSuffix(p, "/")
		}
		return connectionString{account: devAccount, key: devKey, endpoint: proxy + ":10002/" + devAccount}, nil
	}
	cs := connectionString{account: kv["accountname"], key: kv["accountkey"], endpoint: kv["tableendpoint"]}
	if cs.account == "" {
		return cs, fmt.Errorf("StateStorage: no AccountName in the connection string")
	}
	if cs.endpoint == "" {
		protocol, suffix := kv["defaultendpointsprotocol"], kv["endpointsuffix"]
		if protocol == "" {
			protocol = "https"
		}
		if suffix == "" {
			suffix = "core.windows.net"
		}
		cs.endpoint = protocol + "://" + cs.account + ".table." + suffix
	}
	return cs, nil
}
