// Command convoy is the Azure Functions custom handler of the Sequential
// Convoy. Started by the Functions host (no arguments) it serves the
// functions on 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT (serve.go); `convoy
// publish`, `convoy replay` and `convoy skip` are commands for users
// (commands.go), as are `convoy status` and `convoy blocked` (keys.go) and
// `convoy functions`, which writes a new domain's function folders
// (functions.go); the Azure clients and the one choice of transport are in
// clients.go. `convoy help` and `-h`/`--help` anywhere print usage, exit 0
// and start nothing (help.go).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the command line args and returns the exit code.
func run(args []string) int {
	cmd, rest := "serve", args
	if len(args) > 0 {
		cmd, rest = args[0], args[1:]
	}
	if wantsHelp(args) {
		// Help never starts anything: `convoy -h`, `convoy help [command]`,
		// `convoy <command> -h|--help` (even with other arguments).
		topic := ""
		switch {
		case cmd == "help" && len(rest) > 0:
			topic = rest[0]
		case cmd != "help" && !isHelpFlag(cmd):
			topic = cmd
		}
		text, ok := helpText(topic)
		if !ok {
			fmt.Fprintf(os.Stderr, "convoy: no help for %q: unknown command\n%s\n", topic, usage)
			return 2
		}
		fmt.Print(text)
		return 0
	}
	var err error
	switch cmd {
	case "serve":
		if len(rest) > 0 {
			err = fmt.Errorf("serve takes no arguments (got %q): it reads its settings from the environment, see convoy help serve", rest)
			break
		}
		err = serve()
	case "publish":
		err = publish(rest)
	case "replay":
		err = replayOrders(rest)
	case "skip":
		err = skipGap(rest)
	case "status":
		err = keyStatus(rest)
	case "blocked":
		err = blockedKeys(rest)
	case "functions":
		err = writeFunctions(rest)
	default:
		fmt.Fprintf(os.Stderr, "convoy: unknown command %q\n%s\n", cmd, usage)
		return 2
	}
	if err == nil {
		return 0
	}
	var stopped signalStop
	if errors.As(err, &stopped) {
		// A clean stop, already logged at Information: a line on stderr
		// would reach the host's log as an Error.
		return stopped.code()
	}
	fmt.Fprintln(os.Stderr, "convoy:", err)
	var bad usageError
	if errors.As(err, &bad) {
		return 2
	}
	return 1
}

// usageError: the command line itself is wrong (exit code 2, as flag's).
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// usageErrorf is a usageError that ends with a pointer to the command's help.
func usageErrorf(cmd, format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...) + fmt.Sprintf(" (convoy %s -h for help)", cmd)}
}

// parseFlags parses a command's flags; a bad flag is a usageError (-h and
// --help never get here: run answers them first).
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(discard{})
	if err := fs.Parse(args); err != nil {
		return usageErrorf(fs.Name(), "%v", err)
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

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
