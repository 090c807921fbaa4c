package azurite

import (
	"context"
	"os"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// TestSharedAccountsAreApart: two tests' accounts on the shared Azurite
// each have their own table of the same name; what one writes, the other
// never reads, and each lists only its own tables.
func TestSharedAccountsAreApart(t *testing.T) {
	ctx := context.Background()
	a, b := Shared(t), Shared(t)
	if a.Name == b.Name || a.Port != b.Port {
		t.Fatalf("two shared accounts %+v and %+v: want two names on one server", a, b)
	}
	table := func(acc Account) (*aztables.ServiceClient, *aztables.Client) {
		svc, err := aztables.NewServiceClientFromConnectionString(acc.ConnectionString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := svc.NewClient("orders")
		if _, err := c.CreateTable(ctx, nil); err != nil {
			t.Fatalf("%s: create table orders: %v", acc.Name, err)
		}
		return svc, c
	}
	_, ta := table(a)
	svcB, tb := table(b)
	if _, err := ta.AddEntity(ctx, []byte(`{"PartitionKey":"o-1","RowKey":"head"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.GetEntity(ctx, "o-1", "head", nil); err == nil {
		t.Fatalf("account %s reads the row account %s wrote", b.Name, a.Name)
	}
	if _, err := svcB.CreateTable(ctx, "onlyb", nil); err != nil {
		t.Fatal(err)
	}
	svcA, _ := aztables.NewServiceClientFromConnectionString(a.ConnectionString(), nil)
	pager := svcA.NewListTablesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tbl := range page.Tables {
			if *tbl.Name != "orders" {
				t.Errorf("account %s lists table %s, which account %s created", a.Name, *tbl.Name, b.Name)
			}
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}
