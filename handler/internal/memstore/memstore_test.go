package memstore_test

import (
	"testing"

	"github.com/convoy-dev/convoy/handler/internal/healtest"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/internal/storetest"
)

func TestConformance(t *testing.T) { storetest.Run(t, memstore.New()) }

func TestReplayStateConformance(t *testing.T) { healtest.Run(t, memstore.New()) }

func TestLedgersConformance(t *testing.T) { ledgertest.Run(t, memstore.NewLedgers()) }

// TestLedgersScopes: the order domain's keys and the account domain's
// share the records, not the seqs nor the active index.
func TestLedgersScopes(t *testing.T) {
	s := memstore.NewLedgers()
	ledgertest.Run(t, s.Keys("account"))
	ledgertest.Scopes(t, s, s.Keys("account"))
}
