package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/handler/settings"
)

const usage = `usage: convoy [command] [flags] [arguments]

commands:
  (none), serve          serve the functions (how the Functions host starts it)
  publish FILE...        send ledger files ("-" for stdin) to the ledgers queue,
                         or with --direct de-batch them onto the orders queue here
  replay ORDERID...      re-send an order's dead letters, as POST /api/orders/{id}/replay
  replay --all [--max N] re-send every placeable dead letter, round after round
  skip ORDERID SEQ       record an order's missing seq as skipped, as POST /api/orders/{id}/skip?seq=N
  status ID...           a key's state and history, as GET /api/orders/{id}
  blocked                every blocked key, as GET /api/orders?blocked=true
  functions              write the function folders of a newly registered domain
  help [command]         this text, or a command's (also: convoy COMMAND -h)

replay, skip, status and blocked act on orders, or with --domain NAME on the keys of
another registered domain (accounts: convoy status --domain accounts acc-1).
They and publish read their settings from the environment, then from the Values of
local.settings.json (--settings FILE); serve from the environment only.
`

// The settings the user commands read, named once.
const (
	settingsServiceBus = `  ServiceBusConnection                  Service Bus connection string (the one convoy-devhost prints), or
  ServiceBusConnection__fullyQualifiedNamespace (+ ServiceBusConnection__clientId): identity-based
`
	settingsStorage = `  StateStorage                          Table Storage connection string (UseDevelopmentStorage=true for
                                        Azurite on 127.0.0.1:10002), or
  StateStorage__tableServiceUri (+ StateStorage__clientId): identity-based
`
	settingsSource = `Settings come from the environment first, then from the Values of the file named by
--settings (default local.settings.json in the current directory; a missing file is no error).
`
)

var helps = map[string]string{
	"": usage,
	"serve": `usage: convoy [serve]

Serves the functions on 127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT until SIGTERM or Ctrl-C, then
finishes the invocations in flight (ShutdownTimeoutSeconds) and exits 128+signal. This is
how the Functions host (or convoy-devhost) starts the handler; run the app locally with
make devhost instead.

Settings, from the environment only (the host sets them from the app settings):
  FUNCTIONS_CUSTOMHANDLER_PORT          the port to listen on (given by the host)
` + settingsServiceBus + settingsStorage + `  per domain (Orders, Accounts, …): <Domain>QueueName, <Domain>TableName,
  <Domain>MaxMessageBytes, <Domain>QueuePartitioned;
  LedgersQueueName, LedgersTableName, MaxRequestBytes,
  ShutdownTimeoutSeconds, OrderCacheSize, TransientRetrySeconds, LogFormat, LogLevel,
  MaxLedgerTransactions, ReplayScanLimit,
  AutoReplayEnabled, AutoReplaySchedule, AutoReplayBackoffSeconds, AutoReplayBackoffMaxSeconds,
  AutoReplayBreakerSeconds, AutoReplayMaxOrders   (defaults: docs/settings.md)
`,
	"publish": `usage: convoy publish [--direct] [--stream NAME] [--settings FILE] FILE...

Validates each ledger file ("-" reads stdin) and sends it to the ledgers queue (SessionId =
its stream), where LedgerIngest de-batches it; with --direct it de-batches it here, each
entry onto its domain's queue (orders, accounts, …). Prints one JSON line per ledger; an invalid ledger is refused with every
problem named, and nothing of it is sent.

flags:
  --direct         de-batch here, onto the domains' queues (needs StateStorage)
  --stream NAME    the ledger's stream, replacing the document's own
  --settings FILE  file whose Values fill in settings missing from the environment

settings:
` + settingsServiceBus + settingsStorage + `                                        (optional without --direct: then publish cannot check
                                        the ledger's record and says so)
  LedgersQueueName (` + settings.DefaultLedgersQueue + `), OrdersQueueName (orders), AccountsQueueName (accounts),
  LedgersTableName (` + settings.DefaultLedgersTable + `), MaxLedgerTransactions, <Domain>MaxMessageBytes,
  <Domain>QueuePartitioned, TransientRetrySeconds
` + settingsSource,
	"replay": `usage: convoy replay [--domain NAME] [--settings FILE] ID...
       convoy replay --all [--domain NAME] [--max N] [--settings FILE]

Does what POST /api/orders/{orderId}/replay does, with the same code: re-sends the order's
dead-lettered messages in seq order with a new MessageId and completes each dead-lettered copy
after its re-send. A dead letter whose seq the order already applied (read from StateStorage)
is completed without being re-sent (a duplicate). Dead letters of a permanent cause (the
processor cannot read them: no seq, a bad body) are left dead-lettered and listed under "left"
with why: skip their gap instead (convoy skip). Prints the report as JSON; exits 1 when the
replay failed or could not see every dead letter of the order ("incomplete": run again).

With --domain NAME it replays keys of that domain, from its queue (POST /api/NAME/{id}/replay).
--all replays every placeable dead letter of the domain's queue, N per round (default 500), a
progress line per round on stderr and the last round's JSON on stdout.

flags:
` + domainFlagHelp + `  --all            every key, instead of named keys
  --max N          with --all: dead letters received per round (1 to ReplayScanLimit)
  --settings FILE  file whose Values fill in settings missing from the environment

settings (StateStorage is required: without the orders' appliedSeq a replay would re-send
messages already applied or skipped):
` + settingsServiceBus + settingsStorage + `  OrdersQueueName (orders), OrdersTableName (ConvoyOrders), AccountsQueueName (accounts),
  AccountsTableName (ConvoyAccounts), ReplayScanLimit (` + strconv.Itoa(settings.DefaultReplayScanLimit) + `)
` + settingsSource,
	"skip": `usage: convoy skip [--domain NAME] [--settings FILE] ID SEQ

Does what POST /api/orders/{orderId}/skip?seq=SEQ does, with the same code: records seq SEQ,
which must be the order's first missing seq (its appliedSeq + 1, with later seqs parked), as
rejected with reason "skipped by operator", then applies the parked messages that follow it.
Any other SEQ is refused and changes nothing. Prints the result (skipped, drained, the order)
as JSON. Use it for a message that can never be applied (a poison message, one never sent);
the skipped message's effect is lost for good. With --domain NAME, a key of that domain
(POST /api/NAME/{id}/skip).

flags:
` + domainFlagHelp + `  --settings FILE  file whose Values fill in settings missing from the environment

settings:
` + settingsStorage + `  OrdersTableName (ConvoyOrders), AccountsTableName (ConvoyAccounts), TransientRetrySeconds (` + strconv.Itoa(int(settings.DefaultRetryBudget/time.Second)) + `)
  (Service Bus is not used: a dead-lettered copy of the skipped seq stays dead-lettered,
  and a replay later completes it as a duplicate)
` + settingsSource,
}

const domainFlagHelp = `  --domain NAME    the domain of the keys: orders (the default), accounts, or another registered one
`

func init() {
	helps["help"] = usage
	helps["status"] = `usage: convoy status [--domain NAME] [--page-size N] [--settings FILE] ID...

Prints each key's page as GET /api/<domain>/{id} answers it, read from the domain's table:
its state, appliedSeq, parked and failing messages, and the first N rows of its history
(default 20). The lag, which the HTTP answer adds, is not read.

flags:
` + domainFlagHelp + `  --page-size N    history rows shown (1 to 1000)
  --settings FILE  file whose Values fill in settings missing from the environment

settings:
` + settingsStorage + `  <Domain>TableName: OrdersTableName (ConvoyOrders), AccountsTableName (ConvoyAccounts)
` + settingsSource
	helps["blocked"] = `usage: convoy blocked [--domain NAME] [--settings FILE]

Prints every blocked key of the domain (a key whose next seq is missing, with later seqs
parked), oldest first, as GET /api/<domain>?blocked=true lists them page after page:
{"<domain>": [{"<noun>Id", "appliedSeq", "parked", "missingSeq", "blockedSince"}, ...]}. Replay a
key's dead letters with convoy replay, or skip its gap with convoy skip.

flags:
` + domainFlagHelp + `  --settings FILE  file whose Values fill in settings missing from the environment

settings:
` + settingsStorage + `  <Domain>TableName: OrdersTableName (ConvoyOrders), AccountsTableName (ConvoyAccounts)
` + settingsSource
	helps["functions"] = `usage: convoy functions [--dir DIR]

Writes, for every registered domain (handler/domains) that has none yet, its function folders
under DIR (default functions): <Noun>Processor on the queue its <Domain>QueueName setting
names, <Noun>Status, Blocked<Domain>, Replay<Noun> and Skip<Noun>Gap (docs/your-rules.md).
Folders that exist are left as they are. Run it from the repository after registering a domain.
`
}

// helpText is the help of topic ("" for the program's).
func helpText(topic string) (string, bool) {
	t, ok := helps[topic]
	return t, ok
}

// wantsHelp: the command line asks for help (help as the command, or -h,
// -help or --help before a "--").
func wantsHelp(args []string) bool {
	if len(args) > 0 && args[0] == "help" {
		return true
	}
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

func isHelpFlag(a string) bool {
	switch strings.TrimLeft(a, "-") {
	case "h", "help":
		return strings.HasPrefix(a, "-")
	}
	return false
}
