// Package settings reads the program's app settings (environment variables set
// by the Functions host from app settings or local.settings.json) into one
// validated struct. Every setting has a documented default; Load reports every
// missing or malformed setting by name, at once.
//
// It is composition, not support: it sits above the packages whose behaviour
// the settings tune and imports them for their defaults. Each default is
// owned, with its why, by the package that applies it (the HTTP package its
// request limit, ledger its limits, replay its scan limit, heal AutoReplay's,
// convoy the processor's); settings owns only the names of the app's
// resources and what serve, in package main, applies.
package settings

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/replay"
	"github.com/convoy-dev/convoy/handler/schedule"
)

// DevelopmentStorage is what UseDevelopmentStorage=true means: Azurite's
// well-known account on its default table port. The Go SDK does not understand
// the shorthand itself.
const DevelopmentStorage = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;"

// Connection is either a connection string or an identity-based endpoint.
type Connection struct {
	ConnectionString string // set for key- or emulator-based connections
	Endpoint         string // fully qualified namespace (Service Bus) or table service URI (Storage)
	ClientID         string // user-assigned managed identity; empty for DefaultAzureCredential / system identity
	Credential       string // "managedidentity" forces ManagedIdentityCredential
}

// UsesIdentity reports whether the connection authenticates with Microsoft Entra ID.
func (c Connection) UsesIdentity() bool { return c.ConnectionString == "" }

// Settings is everything the program reads from its environment.
type Settings struct {
	Port            int           // FUNCTIONS_CUSTOMHANDLER_PORT (legacy FUNCTIONS_HTTPWORKER_PORT); default 8080
	ServiceBus      Connection    // ServiceBusConnection or ServiceBusConnection__fullyQualifiedNamespace
	Storage         Connection    // StateStorage or StateStorage__tableServiceUri
	Domains         []Domain      // one per registered domain (package domains), in its order
	LedgersQueue    string        // LedgersQueueName; default "ledgers"
	LedgersTable    string        // LedgersTableName; default "ConvoyLedgers"
	MaxRequestBytes int64         // MaxRequestBytes; default 64 MiB
	ShutdownTimeout time.Duration // ShutdownTimeoutSeconds; default 25s
	OrderCacheSize  int           // OrderCacheSize; orders whose state each instance caches; default 1000
	RetryBudget     time.Duration // TransientRetrySeconds; in-invocation retry budget; default 20s
	LogFormat       string        // LogFormat: "json" or "text"; default json in Azure, text elsewhere
	LogLevel        string        // LogLevel: debug, info, warn, error; default info

	MaxTransactions int // MaxLedgerTransactions: transactions per ledger; default 200000

	ReplayScanLimit int // ReplayScanLimit: dead letters one replay receives (holds locked) at most; default 5000

	LagWindow time.Duration // LagWindowSeconds: the window an order's lag status is judged over; default 300
	LagPerRun int           // LagSurveyOrdersPerRun: active orders one AutoReplay run surveys at most, from where the last stopped; default 10000

	AutoReplay AutoReplay
}

// Domain is where one registered domain lives: the names of its settings
// derive from its Name, Prefix(d) ("Orders" for "orders").
type Domain struct {
	Rules            keyed.Domain
	Queue            string // <Prefix>QueueName; default the domain's Name ("orders")
	Table            string // <Prefix>TableName; default "Convoy"+Prefix ("ConvoyOrders")
	MaxMessageBytes  int    // <Prefix>MaxMessageBytes: its queue's message size limit; default 262144 (Standard)
	QueuePartitioned bool   // <Prefix>QueuePartitioned: send one session per batch; default false
}

// Name is the domain's name ("orders").
func (d Domain) Name() string { return d.Rules.Name() }

// Prefix is what the names of a domain's settings start with: its Name
// with a capital first letter ("Orders": OrdersQueueName, OrdersTableName).
func Prefix(d keyed.Domain) string {
	name := d.Name()
	if name == "" {
		return ""
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

// DefaultQueue and DefaultTable are a domain's queue and table when its
// settings name none, as infra/ deploys them.
func DefaultQueue(d keyed.Domain) string { return d.Name() }
func DefaultTable(d keyed.Domain) string { return "Convoy" + Prefix(d) }

// QueueSetting is the setting naming a domain's queue, which its processor
// function's binding reads (%OrdersQueueName%).
func QueueSetting(d keyed.Domain) string { return Prefix(d) + "QueueName" }

// TableSetting is the setting naming a domain's table.
func TableSetting(d keyed.Domain) string { return Prefix(d) + "TableName" }

// Domain returns the settings of the domain called name.
func (s Settings) Domain(name string) (Domain, bool) {
	for _, d := range s.Domains {
		if d.Name() == name {
			return d, true
		}
	}
	return Domain{}, false
}

// Default is the first registered domain's settings (orders).
func (s Settings) Default() Domain { return s.Domains[0] }

// AutoReplay are the settings of the AutoReplay timer function (package heal).
type AutoReplay struct {
	Enabled     bool          // AutoReplayEnabled: true or false; default true (false: figures only)
	Schedule    string        // AutoReplaySchedule: NCRONTAB, six fields; default "0 */1 * * * *" (read by the host: %AutoReplaySchedule%)
	BackoffBase time.Duration // AutoReplayBackoffSeconds: wait after an order's first attempt, doubled per attempt; default 60
	BackoffMax  time.Duration // AutoReplayBackoffMaxSeconds: the longest wait (and breaker pause); default 3600
	BreakerBase time.Duration // AutoReplayBreakerSeconds: pause after a failing run, doubled per failing run; default 60
	MaxOrders   int           // AutoReplayMaxOrders: orders replayed per run; default 1000
	// BlockedPerRun: AutoReplayBlockedPerRun, entries of the blocked index one run verifies at most, from where the last stopped; default 5000
	BlockedPerRun int
}

// Defaults settings owns: the names of the app's queues and tables, as
// infra/ deploys them (the function.json bindings read the queue names
// from these settings), and what serve (package main, which nothing can
// import) applies.
const (
	DefaultPort            = 8080 // outside the host, which always sets FUNCTIONS_CUSTOMHANDLER_PORT
	DefaultLedgersQueue    = "ledgers"
	DefaultLedgersTable    = "ConvoyLedgers"
	DefaultShutdownTimeout = 25 * time.Second // SIGTERM's wait for in-flight invocations
	// DefaultAutoReplaySchedule: every minute, as deployed; the host reads
	// it (%AutoReplaySchedule%), the handler only validates it.
	DefaultAutoReplaySchedule = "0 */1 * * * *"
)

// Defaults of the packages that apply them, each with its why there.
const (
	DefaultMaxRequestBytes = handler.DefaultMaxRequestBytes
	DefaultOrderCacheSize  = convoy.DefaultCacheSize
	DefaultRetryBudget     = fault.DefaultRetryBudget
	DefaultMaxMessageBytes = ledger.DefaultMaxMessageBytes
	DefaultMaxTransactions = ledger.DefaultMaxTransactions
	DefaultReplayScanLimit = replay.DefaultMaxScan
	DefaultLagWindow       = convoy.DefaultLagWindow
	DefaultLagPerRun       = heal.DefaultLagPerRun

	DefaultAutoReplayBackoff    = heal.DefaultBackoffBase
	DefaultAutoReplayBackoffMax = heal.DefaultBackoffMax
	DefaultAutoReplayBreaker    = heal.DefaultBreakerBase
	DefaultAutoReplayMaxOrders  = heal.DefaultMaxOrders
	DefaultAutoReplayBlocked    = heal.DefaultBlockedPerRun
)

// Load reads and validates the handler's settings through lookup
// (os.LookupEnv), for the registered domains (domains.All).
func Load(lookup func(string) (string, bool)) (Settings, error) {
	return load(lookup, true, domains.All)
}

// LoadForClient reads the settings of a command a user runs (publish):
// Table Storage is needed only when the command writes state itself.
func LoadForClient(lookup func(string) (string, bool), needStorage bool) (Settings, error) {
	return load(lookup, needStorage, domains.All)
}

// LoadDomains is Load for the domains ds (tests of other registrations).
func LoadDomains(lookup func(string) (string, bool), ds []keyed.Domain) (Settings, error) {
	return load(lookup, true, ds)
}

func load(lookup func(string) (string, bool), needStorage bool, ds []keyed.Domain) (Settings, error) {
	r := reader{lookup: lookup, storageOptional: !needStorage}
	s := Settings{
		Port:            r.port(),
		ServiceBus:      r.serviceBus(),
		Storage:         r.storage(),
		Domains:         r.domains(ds),
		LedgersQueue:    r.name("LedgersQueueName", DefaultLedgersQueue, validQueueName),
		LedgersTable:    r.name("LedgersTableName", DefaultLedgersTable, validTableName),
		MaxRequestBytes: int64(r.positiveInt("MaxRequestBytes", DefaultMaxRequestBytes)),
		ShutdownTimeout: time.Duration(r.positiveInt("ShutdownTimeoutSeconds", int(DefaultShutdownTimeout/time.Second))) * time.Second,
		OrderCacheSize:  r.positiveInt("OrderCacheSize", DefaultOrderCacheSize),
		RetryBudget:     time.Duration(r.positiveInt("TransientRetrySeconds", int(DefaultRetryBudget/time.Second))) * time.Second,
		LogFormat:       r.oneOf("LogFormat", defaultLogFormat(lookup), "json", "text"),
		LogLevel:        r.oneOf("LogLevel", "info", "debug", "info", "warn", "error"),
		MaxTransactions: r.positiveInt("MaxLedgerTransactions", DefaultMaxTransactions),
		ReplayScanLimit: r.positiveInt("ReplayScanLimit", DefaultReplayScanLimit),
		LagWindow:       r.seconds("LagWindowSeconds", DefaultLagWindow),
		LagPerRun:       r.positiveInt("LagSurveyOrdersPerRun", DefaultLagPerRun),
		AutoReplay: AutoReplay{
			Enabled:       r.oneOf("AutoReplayEnabled", "true", "true", "false") == "true",
			Schedule:      r.schedule("AutoReplaySchedule", DefaultAutoReplaySchedule),
			BackoffBase:   r.seconds("AutoReplayBackoffSeconds", DefaultAutoReplayBackoff),
			BackoffMax:    r.seconds("AutoReplayBackoffMaxSeconds", DefaultAutoReplayBackoffMax),
			BreakerBase:   r.seconds("AutoReplayBreakerSeconds", DefaultAutoReplayBreaker),
			MaxOrders:     r.positiveInt("AutoReplayMaxOrders", DefaultAutoReplayMaxOrders),
			BlockedPerRun: r.positiveInt("AutoReplayBlockedPerRun", DefaultAutoReplayBlocked),
		},
	}
	if a := s.AutoReplay; a.BackoffMax < a.BackoffBase {
		r.fail("AutoReplayBackoffMaxSeconds", "%d is below AutoReplayBackoffSeconds (%d)", int(a.BackoffMax/time.Second), int(a.BackoffBase/time.Second))
	}
	r.distinct(s)
	return s, errors.Join(r.errs...)
}

// domains reads each domain's settings.
func (r *reader) domains(ds []keyed.Domain) []Domain {
	if len(ds) == 0 {
		r.fail("domains", "no domain is registered (package domains)")
	}
	out := make([]Domain, 0, len(ds))
	for _, d := range ds {
		if why := badDomainName(d); why != "" {
			r.fail("domains", "%s", why)
			continue
		}
		p := Prefix(d)
		out = append(out, Domain{Rules: d,
			Queue:            r.name(QueueSetting(d), DefaultQueue(d), validQueueName),
			Table:            r.name(TableSetting(d), DefaultTable(d), validTableName),
			MaxMessageBytes:  r.positiveInt(p+"MaxMessageBytes", DefaultMaxMessageBytes),
			QueuePartitioned: r.oneOf(p+"QueuePartitioned", "false", "true", "false") == "true",
		})
	}
	return out
}

// badDomainName says why d's Name or Noun cannot name its resources: they
// become its queue, its table ("Convoy"+Prefix), its settings, its
// functions and routes, and the alerts read them back with \w+, so
// lower-case letters and digits, starting with a letter; "" when they can.
func badDomainName(d keyed.Domain) string {
	for _, n := range []struct{ what, v string }{{"Name", d.Name()}, {"Noun", d.Noun()}} {
		ok := n.v != "" && len(n.v) <= 40 && n.v[0] >= 'a' && n.v[0] <= 'z'
		for _, c := range n.v {
			ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9')
		}
		if !ok {
			return fmt.Sprintf("domain %q: its %s %q must be 1 to 40 lower-case letters and digits, starting with a letter "+
				"(it names the domain's queue, table, settings, functions and routes)", d.Name(), n.what, n.v)
		}
	}
	return ""
}

// distinct: every domain has a queue and a table of its own, neither the
// ledgers'. Table names are case-insensitive.
func (r *reader) distinct(s Settings) {
	queues := map[string]string{s.LedgersQueue: "LedgersQueueName"}
	tables := map[string]string{strings.ToLower(s.LedgersTable): "LedgersTableName"}
	for _, d := range s.Domains {
		if other, ok := queues[d.Queue]; ok {
			r.fail(QueueSetting(d.Rules), "must differ from %s (%q)", other, d.Queue)
		}
		queues[d.Queue] = QueueSetting(d.Rules)
		if other, ok := tables[strings.ToLower(d.Table)]; ok {
			r.fail(TableSetting(d.Rules), "must differ from %s (%q)", other, d.Table)
		}
		tables[strings.ToLower(d.Table)] = TableSetting(d.Rules)
	}
}

// In Azure logs are parsed, so JSON (the Bicep templates also set LogFormat).
func defaultLogFormat(lookup func(string) (string, bool)) string {
	if inAzure(lookup) {
		return "json"
	}
	return "text"
}

// inAzure tells whether the program runs on Azure's Functions platform. App
// Service sets WEBSITE_INSTANCE_ID; Flex Consumption may not, but sets
// WEBSITE_SKU (FlexConsumption) or, in placeholder mode, LEGION_SERVICE_HOST:
// the host's own tests (Azure/azure-functions-host,
// src/WebJobs.Script/Environment/EnvironmentExtensions.cs: IsAppService,
// IsFlexConsumptionSku, IsLinuxConsumptionOnLegion).
func inAzure(lookup func(string) (string, bool)) bool {
	for _, k := range []string{"WEBSITE_INSTANCE_ID", "WEBSITE_SKU", "LEGION_SERVICE_HOST"} {
		if v, ok := lookup(k); ok && v != "" {
			return true
		}
	}
	return false
}

type reader struct {
	lookup          func(string) (string, bool)
	storageOptional bool
	errs            []error
}

func (r *reader) get(name string) string {
	v, _ := r.lookup(name)
	return strings.TrimSpace(v)
}

func (r *reader) fail(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("setting %s: %s", name, fmt.Sprintf(format, args...)))
}

func (r *reader) port() int {
	name, v := "FUNCTIONS_CUSTOMHANDLER_PORT", r.get("FUNCTIONS_CUSTOMHANDLER_PORT")
	if v == "" {
		name, v = "FUNCTIONS_HTTPWORKER_PORT", r.get("FUNCTIONS_HTTPWORKER_PORT")
	}
	if v == "" {
		return DefaultPort
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		r.fail(name, "%q is not a TCP port (1-65535)", v)
	}
	return p
}

func (r *reader) positiveInt(name string, def int) int {
	v := r.get(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		r.fail(name, "%q is not a positive integer", v)
		return def
	}
	return n
}

// maxSeconds bounds duration settings (a day is more than any backoff needs).
const maxSeconds = 86400

func (r *reader) seconds(name string, def time.Duration) time.Duration {
	n := r.positiveInt(name, int(def/time.Second))
	if n > maxSeconds {
		r.fail(name, "%d is more than %d (a day)", n, maxSeconds)
		return def
	}
	return time.Duration(n) * time.Second
}

func (r *reader) schedule(name, def string) string {
	v := r.get(name)
	if v == "" {
		return def
	}
	if _, err := schedule.Parse(v); err != nil {
		r.fail(name, "%v", err)
	}
	return v
}

func (r *reader) oneOf(name, def string, allowed ...string) string {
	v := strings.ToLower(r.get(name))
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.fail(name, "%q is not one of %s", v, strings.Join(allowed, ", "))
	return def
}

func (r *reader) name(setting, def string, valid func(string) string) string {
	v := r.get(setting)
	if v == "" {
		return def
	}
	if why := valid(v); why != "" {
		r.fail(setting, "%q %s", v, why)
	}
	return v
}

// serviceBus follows the Functions host's rule: the plain setting (a
// connection string) wins; otherwise the __fullyQualifiedNamespace group.
func (r *reader) serviceBus() Connection {
	const base = "ServiceBusConnection"
	if strings.HasPrefix(r.get(base), "local://") {
		r.fail(base, "local:// is no longer a transport: the local emulation speaks AMQP; use the connection string convoy-devhost prints (Endpoint=sb://127.0.0.1:<port>;…;UseDevelopmentEmulator=true)")
		return Connection{}
	}
	if cs := r.get(base); cs != "" {
		kv, err := parseConnectionString(cs)
		switch {
		case err != nil:
			r.fail(base, "%v", err)
		case strings.EqualFold(kv["usedevelopmentemulator"], "true") && inAzure(r.lookup):
			r.fail(base, "UseDevelopmentEmulator=true points at a local Service Bus emulator; it is refused in Azure")
		case !strings.HasPrefix(strings.ToLower(kv["endpoint"]), "sb://"):
			r.fail(base, "Endpoint=sb://<namespace>/ is missing")
		case kv["sharedaccesskeyname"] == "" && kv["sharedaccesssignature"] == "":
			r.fail(base, "neither SharedAccessKeyName nor SharedAccessSignature is set")
		}
		return Connection{ConnectionString: cs}
	}
	ns := r.get(base + "__fullyQualifiedNamespace")
	if ns == "" {
		r.fail(base, "set %s (a connection string) or %s__fullyQualifiedNamespace (identity-based)", base, base)
		return Connection{}
	}
	if strings.Contains(ns, "://") || strings.ContainsAny(ns, "/ ;") || !strings.Contains(ns, ".") {
		r.fail(base+"__fullyQualifiedNamespace", "%q is not a host name such as <namespace>.servicebus.windows.net", ns)
	}
	return r.identity(base, Connection{Endpoint: ns})
}

func (r *reader) storage() Connection {
	const base = "StateStorage"
	if cs := r.get(base); cs != "" {
		if strings.EqualFold(strings.ReplaceAll(cs, " ", ""), "UseDevelopmentStorage=true") {
			return Connection{ConnectionString: DevelopmentStorage}
		}
		kv, err := parseConnectionString(cs)
		switch {
		case err != nil:
			r.fail(base, "%v", err)
		case kv["accountname"] == "" && kv["tableendpoint"] == "":
			r.fail(base, "neither AccountName nor TableEndpoint is set")
		case kv["accountkey"] == "" && kv["sharedaccesssignature"] == "":
			r.fail(base, "neither AccountKey nor SharedAccessSignature is set")
		}
		return Connection{ConnectionString: cs}
	}
	uri := r.get(base + "__tableServiceUri")
	if uri == "" && r.storageOptional {
		return Connection{}
	}
	if uri == "" {
		r.fail(base, "set %s (a connection string, or UseDevelopmentStorage=true) or %s__tableServiceUri (identity-based)", base, base)
		return Connection{}
	}
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !isLoopback(u.Hostname())) {
		r.fail(base+"__tableServiceUri", "%q is not an https URL such as https://<account>.table.core.windows.net", uri)
	}
	return r.identity(base, Connection{Endpoint: strings.TrimRight(uri, "/")})
}

func (r *reader) identity(base string, c Connection) Connection {
	c.ClientID = r.get(base + "__clientId")
	c.Credential = strings.ToLower(r.get(base + "__credential"))
	if c.Credential != "" && c.Credential != "managedidentity" {
		r.fail(base+"__credential", "%q is not supported (only managedidentity)", c.Credential)
	}
	return c
}

func isLoopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// parseConnectionString splits "Key=Value;Key=Value" into lower-cased keys.
// Values may themselves contain '=' (base64 keys).
func parseConnectionString(cs string) (map[string]string, error) {
	kv := map[string]string{}
	for part := range strings.SplitSeq(cs, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("not a connection string: %q is not Key=Value", redact(part))
		}
		kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if len(kv) == 0 {
		return nil, errors.New("not a connection string")
	}
	return kv, nil
}

// redact keeps error messages free of secrets: only a short prefix is shown.
func redact(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

// Service Bus entity names: letters, digits, '.', '-', '_', at most 260 characters.
func validQueueName(s string) string {
	if len(s) > 260 {
		return "is longer than 260 characters"
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return "may contain only letters, digits, '.', '-' and '_'"
		}
	}
	return ""
}

// Table names: 3-63 alphanumeric characters, not starting with a digit.
func validTableName(s string) string {
	if len(s) < 3 || len(s) > 63 {
		return "must be 3 to 63 characters"
	}
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return "must be alphanumeric and start with a letter"
		}
	}
	return ""
}
