package handler_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
)

// historyFixture is a fixture holding order o-1 with n transactions (t-0 …,
// amount i) and a rejection at every seq that is a multiple of 10.
func historyFixture(t *testing.T, n int) (*fixture, []string, []int64) {
	t.Helper()
	f := newFixture(t)
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain})
	msgs := []convoy.Message{{Seq: 1, Command: orders.Transaction{OrderID: "o-1", Op: orders.CreateOrder, Currency: "EUR"}}}
	var txIDs []string
	var rejected []int64
	for seq := int64(2); len(txIDs) < n; seq++ {
		amount := int64(len(txIDs))
		tx := orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: fmt.Sprintf("t-%d", len(txIDs)), Amount: &amount}
		if seq%10 == 0 {
			tx.Op, tx.TxID = orders.ModifyTransaction, "none"
			rejected = append(rejected, seq)
		} else {
			txIDs = append(txIDs, tx.TxID)
		}
		msgs = append(msgs, convoy.Message{Seq: seq, Command: tx})
	}
	for k := 0; k < len(msgs); k += 200 {
		if _, err := p.Process(context.Background(), "o-1", msgs[k:min(k+200, len(msgs))]); err != nil {
			t.Fatal(err)
		}
	}
	return f, txIDs, rejected
}

// TestOrderStatusPages: an order that fits one page answers as before (no
// continuation, every transaction and rejection); a longer one answers its
// first page and a continuation, and following the continuations reads
// every transaction and rejection once, in order, with the head on each page.
func TestOrderStatusPages(t *testing.T) {
	f, txIDs, rejected := historyFixture(t, 25)
	code, v := f.do(t, "GET", "/api/orders/o-1", nil)
	if code != 200 || v["continuation"] != nil || len(v["transactions"].([]any)) != 25 || len(v["rejected"].([]any)) != len(rejected) {
		t.Fatalf("one page: %d %v", code, v)
	}
	var onePage []string
	for _, x := range v["transactions"].([]any) {
		onePage = append(onePage, x.(map[string]any)["txId"].(string))
	}
	if !slices.Equal(onePage, txIDs) {
		t.Fatalf("one page: transactions %v, want %v in order", onePage, txIDs)
	}
	wantKeys := []string{"appliedSeq", "complete", "currency", "lag", "orderId", "parked", "rejected", "status", "total", "transactions", "updatedAt"}
	var keys []string
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("fields %v, want today's %v", keys, wantKeys)
	}

	f, txIDs, rejected = historyFixture(t, 2500)
	var gotTx []string
	var gotRej []int64
	path := "/api/orders/o-1?pageSize=300"
	for pages := 1; ; pages++ {
		code, v := f.do(t, "GET", path, nil)
		if code != 200 {
			t.Fatalf("page %d: %d %v", pages, code, v)
		}
		if v["appliedSeq"].(float64) != float64(len(txIDs)+len(rejected)+1) || v["total"].(float64) != float64(len(txIDs)*(len(txIDs)-1)/2) {
			t.Fatalf("page %d: head %v", pages, v)
		}
		txs, rs := v["transactions"].([]any), v["rejected"].([]any)
		if len(txs) > 300 || len(rs) > 300 {
			t.Fatalf("page %d holds %d transactions, %d rejections", pages, len(txs), len(rs))
		}
		for _, x := range txs {
			gotTx = append(gotTx, x.(map[string]any)["txId"].(string))
		}
		for _, r := range rs {
			gotRej = append(gotRej, int64(r.(map[string]any)["seq"].(float64)))
		}
		token, _ := v["continuation"].(string)
		if token == "" {
			if pages != 9 {
				t.Fatalf("%d pages for 2,500 transactions in pages of 300, want 9", pages)
			}
			break
		}
		path = "/api/orders/o-1?pageSize=300&continuation=" + url.QueryEscape(token)
	}
	if !slices.Equal(gotTx, txIDs) || !slices.Equal(gotRej, rejected) {
		t.Fatalf("paged history: %d transactions, %d rejections; want %d, %d in order", len(gotTx), len(gotRej), len(txIDs), len(rejected))
	}
	if code, v := f.do(t, "GET", "/api/orders/o-1", nil); code != 200 || len(v["transactions"].([]any)) != 1000 || v["continuation"] == nil {
		t.Fatalf("default page: %d, %d transactions, continuation %v", code, len(v["transactions"].([]any)), v["continuation"])
	}
}

// TestOrderStatusParamsValidated: a bad pageSize or continuation is a 400
// that says what is wrong.
func TestOrderStatusParamsValidated(t *testing.T) {
	f, _, _ := historyFixture(t, 3)
	for _, tc := range []struct{ query, want string }{
		{"pageSize=0", "pageSize \"0\" is not an integer between 1 and 1000"},
		{"pageSize=1001", "between 1 and 1000"},
		{"pageSize=ten", "pageSize \"ten\""},
		{"pageSize=1&pageSize=2", "pageSize is given 2 times"},
		{"continuation=", "continuation is empty"},
		{"continuation=abc", "not a token this service issued"},
		{"continuation=" + convoy.HistoryCursor{Rows: -1, Rejected: -1}.Token(), "not a token this service issued"},
	} {
		code, v := f.do(t, "GET", "/api/orders/o-1?"+tc.query, nil)
		if code != 400 || !strings.Contains(fmt.Sprint(v["error"]), tc.want) {
			t.Errorf("?%s: %d %v, want 400 saying %q", tc.query, code, v, tc.want)
		}
	}
	if code, v := f.do(t, "GET", "/api/orders/o-404?pageSize=5", nil); code != 404 {
		t.Errorf("unknown order: %d %v", code, v)
	}
}

// FuzzOrderStatusQuery: whatever pageSize and continuation say, OrderStatus
// answers 200 or a 400 JSON error, never a 5xx; a 200 holds at most
// pageSize of each list, and its continuation, if any, is accepted in turn.
func FuzzOrderStatusQuery(f *testing.F) {
	f.Add("2", "")
	f.Add("", convoy.HistoryCursor{Rows: 1, Rejected: -1}.Token())
	f.Add("1000", convoy.HistoryCursor{Rows: 0, Rejected: 3}.Token())
	f.Add("-1", "aDEuMS4x")
	f.Add("3", "aDEuOTIyMzM3MjAzNjg1NDc3NTgwNy4x")
	fx, _, _ := historyFixture(&testing.T{}, 7)
	f.Fuzz(func(t *testing.T, size, token string) {
		q := url.Values{}
		if size != "" {
			q.Set("pageSize", size)
		}
		if token != "" {
			q.Set("continuation", token)
		}
		code, v := fx.do(t, "GET", "/api/orders/o-1?"+q.Encode(), nil)
		switch code {
		case 200:
			n := convoy.DefaultHistoryPageSize
			fmt.Sscan(size, &n)
			if len(v["transactions"].([]any)) > n || len(v["rejected"].([]any)) > n {
				t.Fatalf("pageSize %q: a page of %d transactions", size, len(v["transactions"].([]any)))
			}
			if next, ok := v["continuation"].(string); ok {
				if _, err := convoy.ParseHistoryCursor(next); err != nil {
					t.Fatalf("issued continuation %q refused: %v", next, err)
				}
			}
		case 400:
			if v["error"] == nil {
				t.Fatalf("400 without an error: %v", v)
			}
		default:
			t.Fatalf("pageSize %q continuation %q: %d %v", size, token, code, v)
		}
	})
}
