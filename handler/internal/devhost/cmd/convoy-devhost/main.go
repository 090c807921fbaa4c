// Command convoy-devhost is a development tool, never deployed: it runs the
// staged function app under the local emulation of the Functions host and
// Service Bus (package devhost), against Azurite; and it stages the app, for
// the emulation and for a publish alike.
//
//	convoy-devhost stage       lay the function app out in -app, as published (make stage)
//	convoy-devhost demo        the whole pipeline on the sample ledgers, checked (make demo)
//	convoy-devhost run         serve until Ctrl-C or SIGTERM, for `convoy publish` and curl (make devhost)
//	convoy-devhost break       against a running `run`: one blocked order of each kind and a blocked account (make break)
//	convoy-devhost port-free   fail, saying what to do, when a port is taken (make devhost checks first)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/devhost/cmd/convoy-devhost/demo"
)

const usage = `usage: convoy-devhost COMMAND [flags]

commands:
  stage       lay the function app out in -app (default dist/), as it is published: host.json,
              the handler binary, each function's function.json, .funcignore (make stage)
  demo        run the whole pipeline on the sample ledgers and check every order (make demo)
  run         serve the staged app under the emulated Functions host and Service Bus, with
              Azurite, until Ctrl-C or SIGTERM (make devhost)
  break       against a running 'run': create one blocked order of each kind, a poison message
              (permanent cause) and a transient failure, and a blocked account, to practise
              replay and skip (make break)
  port-free   exit 1, saying how to choose another, when a port is taken (make devhost)

convoy-devhost COMMAND -h lists the command's flags.
`

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Print(usage)
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	app := fs.String("app", "dist", "the staged function app (make stage)")
	binary := fs.String("binary", "bin/convoy", "the handler binary to stage (stage)")
	queues := fs.String("queues", "infra/local/servicebus-emulator-config.json", "queue properties (Service Bus emulator config format)")
	ledgers := fs.String("ledgers", "testdata/ledgers", "sample ledgers for the demo")
	late := fs.String("late", "03-afternoon.json", "the demo ledger whose publisher stalls, so that the next ledger overtakes it")
	logFile := fs.String("log", "", "where the emulation and the handler log (default: devhost.log in the -app directory)")
	port := fs.Int("port", 7071, "front end port (run, break, port-free)")
	sbPort := fs.Int("servicebus-port", 5672, "the Service Bus emulation's AMQP port (run); another is picked when it is taken")
	instances := fs.Int("instances", 1, "the most host instances target-based scale-out may start (run)")
	scale := fs.Float64("time-scale", envFloat("DEVHOST_TIME_SCALE", 1), "multiplies lock durations, renewal, time to live and the crash window (run; env DEVHOST_TIME_SCALE)")
	settingsFile := fs.String("settings", "local.settings.json", "app settings: this file's Values, then the environment, which wins (run; a missing file is no error)")
	switch cmd {
	case "stage", "demo", "run", "break", "port-free":
	default:
		fmt.Fprintf(os.Stderr, "convoy-devhost: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	if err := fs.Parse(os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "convoy-devhost %s: unexpected arguments %q\n", cmd, fs.Args())
		os.Exit(2)
	}
	if *port < 1 || *port > 65535 {
		fmt.Fprintf(os.Stderr, "convoy-devhost %s: -port %d is not a TCP port (1-65535)\n", cmd, *port)
		os.Exit(2)
	}
	if *logFile == "" {
		*logFile = filepath.Join(*app, "devhost.log")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd {
	case "stage":
		err = stage(*app, *binary)
	case "demo":
		err = runDemo(ctx, *app, *ledgers, *queues, *late, *logFile)
	case "run":
		err = run(ctx, runOptions{app: *app, queues: *queues, settingsFile: *settingsFile, logFile: *logFile,
			port: *port, sbPort: *sbPort, instances: *instances, scale: *scale})
	case "break":
		err = breakOrders(ctx, *app, *port)
	case "port-free":
		err = portFree(*port)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "convoy-devhost:", err)
		os.Exit(1)
	}
}

// stage lays the app of the project in the working directory out in app,
// and says what it staged.
func stage(app, binary string) error {
	n, err := devhost.Stage(".", binary, app, nil)
	if err != nil {
		return err
	}
	fmt.Printf("staged in %s/: host.json, %s, %d functions\n", app, filepath.Base(binary), n)
	return nil
}

func runDemo(ctx context.Context, app, ledgers, queues, late, logFile string) error {
	log, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = demo.Run(ctx, demo.Options{AppDir: app, LedgersDir: ledgers, QueueConfig: queues, Late: late, Out: os.Stdout, Log: log})
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

// portFree fails, saying how to choose another port, when port is taken on
// 127.0.0.1 (where the front end listens).
func portFree(port int) error {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("port %d is taken (another make devhost, Core Tools' func start, or any other server): "+
			"stop it, or choose another port: make devhost PORT=%d (then make break PORT=%d)", port, port+1, port+1)
	}
	return ln.Close()
}
