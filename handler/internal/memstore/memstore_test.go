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
