package tablestore_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy/storetest"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

var server *azurite.Server

func TestMain(m *testing.M) {
	var err error
	server, err = azurite.Start(azurite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "tablestore tests need Azurite:", err)
		os.Exit(1)
	}
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, tablestore.New(server.NewTable(t, nil)))
}
