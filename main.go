// Command convoy is the Azure Functions custom handler of the Sequential
// Convoy: the Functions host starts it and invokes its functions over HTTP on
// 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT. This file is the composition root:
// it reads the settings, builds the clients once and serves until SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/settings"
	"github.com/convoy-dev/convoy/handler/tablestore"
)

func main() {
	if err := serve(); err != nil {
		fmt.Fprintln(os.Stderr, "convoy:", err)
		os.Exit(1)
	}
}

func serve() error {
	cfg, err := settings.Load(os.LookupEnv)
	if err != nil {
		return fmt.Errorf("invalid settings:\n%w", err)
	}
	log := handler.NewLogger(cfg.LogFormat, cfg.LogLevel, os.Stdout, os.Stderr)

	tables, err := tableService(cfg.Storage)
	if err != nil {
		return fmt.Errorf("setting StateStorage: %w", err)
	}
	bus, err := serviceBus(cfg.ServiceBus)
	if err != nil {
		return fmt.Errorf("setting ServiceBusConnection: %w", err)
	}
	defer bus.Close(context.Background())

	store := tablestore.New(tables.NewClient(cfg.OrdersTable))
	processor := convoy.NewProcessor(store, convoy.ProcessorOptions{
		CacheSize: cfg.OrderCacheSize,
		Retry:     fault.RetryPolicy{MaxElapsed: cfg.RetryBudget},
	})
	e := handler.New(handler.Deps{Processor: processor, Orders: store, Logger: log, MaxRequestBytes: cfg.MaxRequestBytes})

	// 127.0.0.1 only: the host always calls http://127.0.0.1:PORT.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("custom handler listening", "addr", ln.Addr().String(), "ordersTable", cfg.OrdersTable)

	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight invocations", "timeout", cfg.ShutdownTimeout.String())
	shutdown, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("in-flight invocations did not finish within %s: %w", cfg.ShutdownTimeout, err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
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

func tableService(c settings.Connection) (*aztables.ServiceClient, error) {
	if !c.UsesIdentity() {
		return aztables.NewServiceClientFromConnectionString(c.ConnectionString, nil)
	}
	cred, err := credential(c)
	if err != nil {
		return nil, err
	}
	return aztables.NewServiceClient(c.Endpoint, cred, nil)
}

func serviceBus(c settings.Connection) (*azservicebus.Client, error) {
	if !c.UsesIdentity() {
		return azservicebus.NewClientFromConnectionString(c.ConnectionString, nil)
	}
	cred, err := credential(c)
	if err != nil {
		return nil, err
	}
	return azservicebus.NewClient(c.Endpoint, cred, nil)
}
