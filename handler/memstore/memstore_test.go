package memstore_test

import (
	"github.com/convoy-dev/convoy/handler/heal/healtest"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy/storetest"
	"github.com/convoy-dev/convoy/handler/ledger/ledgertest"
	"github.com/convoy-dev/convoy/handler/memstore"
)

func TestConformance(t *testing.T) { storetest.Run(t, memstore.New()) }

func TestReplayStateConformance(t *testing.T) { healtest.Run(t, memstore.New()) }

func TestLedgersConformance(t *testing.T) { ledgertest.Run(t, memstore.NewLedgers()) }
