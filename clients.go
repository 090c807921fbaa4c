package main

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/servicebus"
	"github.com/convoy-dev/convoy/handler/settings"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

// queueSender is what the program sends with (servicebus.Sender).
type queueSender interface {
	convoy.Sender
	SendLedger(ctx context.Context, ledgerID, stream string, doc []byte) error
	Close(ctx context.Context) error
}

var _ queueSender = (*servicebus.Sender)(nil)

// clients are built once per process and shared.
type clients struct {
	tables  *aztables.ServiceClient // nil when StateStorage is not needed; tablestore.ProcessorRetry
	batches *tablestore.Batches     // entity-group transactions on the same account, as tables
	// operatorTables and operatorBatches are the same account's clients for
	// the callers an operator waits on and AutoReplay
	// (tablestore.OperatorRetry); nil with tables.
	operatorTables  *aztables.ServiceClient
	operatorBatches *tablestore.Batches
	bus             *azservicebus.Client // Service Bus, in Azure or the local emulation alike
	senders         map[string]queueSender
}

// deadLetters opens, for each replay run, the dead-letter sub-queue of
// queue and a sender to it (an operator.Opener, as replays and heal.New take).
func (c *clients) deadLetters(queue string) func() (replay.Source, convoy.Sender, func(), error) {
	return func() (replay.Source, convoy.Sender, func(), error) {
		sender, err := c.sender(queue)
		if err != nil {
			return nil, nil, nil, err
		}
		dl, err := servicebus.NewDeadLetters(c.bus, queue)
		if err != nil {
			return nil, nil, nil, err
		}
		return dl, sender, func() { _ = dl.Close(context.Background()) }, nil
	}
}

func newClients(cfg settings.Settings) (*clients, error) {
	c := &clients{senders: map[string]queueSender{}}
	var err error
	if cfg.Storage != (settings.Connection{}) {
		if c.tables, c.batches, err = tableService(cfg.Storage, tablestore.ProcessorRetry); err != nil {
			return nil, fmt.Errorf("setting StateStorage: %w", err)
		}
		if c.operatorTables, c.operatorBatches, err = tableService(cfg.Storage, tablestore.OperatorRetry); err != nil {
			return nil, fmt.Errorf("setting StateStorage: %w", err)
		}
	}
	if c.bus, err = serviceBus(cfg.ServiceBus); err != nil {
		return nil, fmt.Errorf("setting ServiceBusConnection: %w", err)
	}
	return c, nil
}

func (c *clients) sender(queue string) (queueSender, error) {
	if s, ok := c.senders[queue]; ok {
		return s, nil
	}
	s, err := servicebus.NewSender(c.bus, queue)
	if err != nil {
		return nil, err
	}
	c.senders[queue] = s
	return s, nil
}

func (c *clients) publisher(cfg settings.Settings, progress func(sent, total int)) (*ledger.Publisher, error) {
	ledgers := tablestore.NewLedgers(c.tables.NewClient(cfg.LedgersTable))
	var routes []ledger.Route
	for _, d := range cfg.Domains {
		sender, err := c.sender(d.Queue)
		if err != nil {
			return nil, err
		}
		routes = append(routes, ledger.Route{Domain: ledgerDomain(d), Allocator: ledgers.Keys(d.Rules.Noun()),
			Sender: sender, BatchPerSession: d.QueuePartitioned})
	}
	return ledger.NewPublisher(ledgers, routes, ledger.PublisherOptions{
		Limits:   ledger.Limits{MaxTransactions: cfg.MaxTransactions},
		Retry:    fault.RetryPolicy{MaxElapsed: cfg.RetryBudget},
		Progress: progress,
	}), nil
}

// ledgerDomain is what a ledger's entries of domain d are read and
// measured with.
func ledgerDomain(d settings.Domain) ledger.Domain {
	return ledger.Domain{Rules: d.Rules, MaxMessageBytes: d.MaxMessageBytes}
}

// ledgerDomains are the registered domains as a ledger reads them, the
// default first.
func ledgerDomains(cfg settings.Settings) []ledger.Domain {
	ds := make([]ledger.Domain, len(cfg.Domains))
	for i, d := range cfg.Domains {
		ds[i] = ledgerDomain(d)
	}
	return ds
}

// ledgerRecordTimeout bounds publish's look at a ledger's record.
const ledgerRecordTimeout = 30 * time.Second

// ledgerRecord reads what the ledgers table holds of ledger id: nil when
// nothing, or when StateStorage is not set (nothing can be read).
func (c *clients) ledgerRecord(ctx context.Context, cfg settings.Settings, id string) (*ledger.Record, error) {
	if c.tables == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ledgerRecordTimeout)
	defer cancel()
	return tablestore.NewLedgers(c.tables.NewClient(cfg.LedgersTable)).GetLedger(ctx, id)
}

func (c *clients) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range c.senders {
		_ = s.Close(ctx)
	}
	_ = c.bus.Close(ctx)
}

// credential follows the Functions host's convention for identity-based
// connections: a client id selects that user-assigned managed identity;
// otherwise DefaultAzureCredential (system identity in Azure, az login locally).
func credential(c settings.Connection) (azcore.TokenCredential, error) {
	if c.ClientID != "" || c.Credential == "managedidentity" {
		opts := &azidentity.ManagedIdentityCredentialOptions{}
		if c.ClientID != "" {
			opts.ID = azidentity.ClientID(c.ClientID)
		}
		return azidentity.NewManagedIdentityCredential(opts)
	}
	return azidentity.NewDefaultAzureCredential(nil)
}

// tableService is an aztables client and Batches on the account of c, each
// request retried as retry (tablestore.ProcessorRetry or OperatorRetry).
func tableService(c settings.Connection, retry policy.RetryOptions) (*aztables.ServiceClient, *tablestore.Batches, error) {
	if !c.UsesIdentity() {
		svc, err := aztables.NewServiceClientFromConnectionString(c.ConnectionString, tablestore.ClientOptions(retry))
		if err != nil {
			return nil, nil, err
		}
		batches, err := tablestore.NewBatchesFromConnectionString(c.ConnectionString, tablestore.BatchOptions(retry))
		return svc, batches, err
	}
	cred, err := credential(c)
	if err != nil {
		return nil, nil, err
	}
	svc, err := aztables.NewServiceClient(c.Endpoint, cred, tablestore.ClientOptions(retry))
	return svc, tablestore.NewBatches(c.Endpoint, cred, tablestore.BatchOptions(retry)), err
}

// orderStore is the processor's store on table (tablestore.ProcessorRetry).
func (c *clients) orderStore(table string) *tablestore.Store {
	return tablestore.New(c.tables.NewClient(table), c.batches.Table(table))
}

// operatorStore is the store on table of the callers an operator waits on
// and of AutoReplay (tablestore.OperatorRetry).
// operatorLedgers is the ledgers table, in the scope of domain d's keys, for
// the callers an operator waits on (the status page's lag) and AutoReplay.
func (c *clients) operatorLedgers(table string, d keyed.Domain) *tablestore.Ledgers {
	return tablestore.NewLedgers(c.operatorTables.NewClient(table)).Keys(d.Noun())
}

func (c *clients) operatorStore(table string) *tablestore.Store {
	return tablestore.New(c.operatorTables.NewClient(table), c.operatorBatches.Table(table))
}

// serviceBus is the program's one azservicebus client, with the SDK's own
// retries cut to a blip (servicebus.RetryOptions): every call the handler
// makes has its own deadline and retries, if at all, within it.
func serviceBus(c settings.Connection) (*azservicebus.Client, error) {
	if !c.UsesIdentity() {
		return azservicebus.NewClientFromConnectionString(c.ConnectionString, servicebus.ClientOptions())
	}
	cred, err := credential(c)
	if err != nil {
		return nil, err
	}
	return azservicebus.NewClient(c.Endpoint, cred, servicebus.ClientOptions())
}
