// Command convoy-devhost is a development tool, never deployed: it runs the
// staged function app under the local emulation of the Functions host and
// Service Bus (package devhost), against Azurite.
//
//	convoy-devhost demo   the whole pipeline on the sample ledgers, checked (make demo)
//	convoy-devhost run    serve until Ctrl-C, for `convoy publish` and curl (make devhost)
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: convoy-devhost demo|run [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	app := fs.String("app", "dist", "the staged function app (make stage)")
	queues := fs.String("queues", "infra/local/servicebus-emulator-config.json", "queue properties (Service Bus emulator config format)")
	ledgers := fs.String("ledgers", "testdata/ledgers", "sample ledgers for the demo")
	late := fs.String("late", "03-afternoon.json", "the demo ledger whose publisher stalls, so that the next ledger overtakes it")
	logFile := fs.String("log", filepath.Join("dist", "devhost.log"), "where the emulation and the handler log")
	port := fs.Int("port", 7071, "front end port (run)")
	sbPort := fs.Int("servicebus-port", 5672, "the Service Bus emulation's AMQP port (run); another is picked when it is taken")
	instances := fs.Int("instances", 1, "the most host instances target-based scale-out may start (run)")
	scale := fs.Float64("time-scale", envFloat("DEVHOST_TIME_SCALE", 1), "multiplies lock durations, renewal, time to live and the crash window (run; env DEVHOST_TIME_SCALE)")
	_ = fs.Parse(os.Args[2:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "demo":
		err = demo(ctx, *app, *ledgers, *queues, *late, *logFile)
	case "run":
		err = run(ctx, *app, *queues, *port, *sbPort, *instances, *scale)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "convoy-devhost:", err)
		os.Exit(1)
	}
}

func demo(ctx context.Context, app, ledgers, queues, late, logFile string) error {
	log, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = devhost.RunDemo(ctx, devhost.DemoOptions{AppDir: app, LedgersDir: ledgers, QueueConfig: queues, Late: late, Out: os.Stdout, Log: log})
	if err != nil {
		return fmt.Errorf("%w\n(the emulation's and the handler's log: %s)", err, logFile)
	}
	return nil
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v > 0 {
		return v
	}
	return def
}

func run(ctx context.Context, app, queues string, port, sbPort, instances int, scale float64) error {
	q, err := devhost.LoadQueueConfig(queues)
	if err != nil {
		return err
	}
	az, err := azurite.Start(azurite.Options{Port: 10002}) // Azurite's usual port, if free
	if err != nil {
		if az, err = azurite.Start(azurite.Options{}); err != nil {
			return err
		}
	}
	defer az.Stop()
	if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", sbPort)); err != nil {
		sbPort = 0 // the emulator's usual port is taken: any free one
	} else {
		ln.Close()
	}
	h, err := devhost.Start(devhost.Options{AppDir: app, Queues: q, Port: port, ServiceBusPort: sbPort, Log: os.Stderr, MaxInstances: instances, TimeScale: scale, Settings: map[string]string{
		"StateStorage": az.ConnectionString(), "AzureWebJobsStorage": az.ConnectionString(), "OrdersQueueName": "orders", "LedgersQueueName": "ledgers",
		"AutoReplaySchedule": "0 */1 * * * *", // AutoReplay: every minute, as deployed
	}})
	if err != nil {
		return err
	}
	defer h.Stop()
	fmt.Printf(`convoy-devhost: the function app in %s runs under the local host and Service Bus emulation (development only).
  functions:  %s/api/ledgers (POST), %s/api/orders/{orderId} (GET)
  Service Bus: AMQP 1.0 on %s (plain TCP, as the Service Bus emulator); any Service Bus SDK connects with
              ServiceBusConnection='%s'
  publish:    ServiceBusConnection='%s' go run . publish testdata/ledgers/01-morning.json
  queues:     %s/devhost/queues/{ledgers,orders}[/deadletter] (read-only view)
  state:      Azurite on 127.0.0.1:%d (in memory); for publish --direct:
              StateStorage='%s'
Ctrl-C stops everything.
`, app, h.URL(), h.URL(), h.Bus().Addr(), h.ServiceBusConnectionString(), h.ServiceBusConnectionString(), h.URL(), az.Port, az.ConnectionString())
	<-ctx.Done()
	return nil
}
