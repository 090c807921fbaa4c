// Command convoy is the Azure Functions custom handler of the Sequential
// Convoy. Started by the Functions host (no arguments) it serves the
// functions on 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT (serve.go); `convoy
// publish` and `convoy replay` are commands for users (commands.go); the
// Azure clients and the one choice of transport are in clients.go.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

const usage = `usage:
  convoy                     serve the functions (how the Functions host starts it)
  convoy publish [flags] FILE...
                             send ledger files ("-" for stdin) to the ledgers queue,
                             or with --direct de-batch them onto the orders queue here
  convoy replay ORDERID...   re-send an order's dead-lettered messages in seq order
  convoy replay --all [--max N]
                             re-send every placeable dead letter, grouped by order, in
                             seq order per order, N per round, with a progress line per round
Settings come from the environment, then from local.settings.json (--settings).`

func main() {
	cmd, args := "serve", os.Args[1:]
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve()
	case "publish":
		err = publish(args)
	case "replay":
		err = replayOrders(args)
	case "help":
		fmt.Println(usage)
	default:
		err = fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "convoy:", err)
		var stopped signalStop
		if errors.As(err, &stopped) {
			os.Exit(stopped.code())
		}
		os.Exit(1)
	}
}

// signalStop: the handler stopped on a signal after finishing its in-flight
// invocations. It still exits non-zero (128 + the signal, as shells report
// it): the Functions host never restarts a handler that exits 0
// (WorkerProcess.OnProcessExited), and a host that is still running needs one.
type signalStop struct{ sig os.Signal }

func (s signalStop) Error() string {
	return fmt.Sprintf("stopped on %v after finishing in-flight invocations", s.sig)
}

func (s signalStop) code() int {
	if n, ok := s.sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}
