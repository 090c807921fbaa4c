package settings_test

import (
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/settings"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

const sbConn = "Endpoint=sb://convoy.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=abc="

func TestDefaults(t *testing.T) {
	s, err := settings.Load(env(map[string]string{"ServiceBusConnection": sbConn, "StateStorage": "UseDevelopmentStorage=true"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Port != 8080 || s.Default().Queue != "orders" || s.LedgersQueue != "ledgers" || s.Default().Table != "ConvoyOrders" ||
		s.MaxRequestBytes != 64<<20 || s.ShutdownTimeout != 25*time.Second || s.LogFormat != "text" || s.RetryBudget != 20*time.Second {
		t.Fatalf("defaults: %+v", s)
	}
	if s.Storage.ConnectionString != settings.DevelopmentStorage || s.Storage.UsesIdentity() {
		t.Fatalf("UseDevelopmentStorage=true not expanded: %+v", s.Storage)
	}
}

func TestIdentityBased(t *testing.T) {
	s, err := settings.Load(env(map[string]string{
		"FUNCTIONS_CUSTOMHANDLER_PORT":                  "34567",
		"ServiceBusConnection__fullyQualifiedNamespace": "convoy.servicebus.windows.net",
		"ServiceBusConnection__clientId":                "1111-2222",
		"ServiceBusConnection__credential":              "managedidentity",
		"StateStorage__tableServiceUri":                 "https://convoy.table.core.windows.net/",
		"WEBSITE_INSTANCE_ID":                           "abc",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Port != 34567 || !s.ServiceBus.UsesIdentity() || s.ServiceBus.Endpoint != "convoy.servicebus.windows.net" ||
		s.ServiceBus.ClientID != "1111-2222" || s.Storage.Endpoint != "https://convoy.table.core.windows.net" || s.LogFormat != "json" {
		t.Fatalf("identity settings: %+v", s)
	}
}

func TestErrorsNameEverySetting(t *testing.T) {
	_, err := settings.Load(env(map[string]string{
		"FUNCTIONS_CUSTOMHANDLER_PORT":  "http",
		"ServiceBusConnection":          "Endpoint=https://wrong/;SharedAccessKeyName=a;SharedAccessKey=b",
		"StateStorage__tableServiceUri": "http://convoy.table.core.windows.net",
		"OrdersQueueName":               "orders queue",
		"OrdersTableName":               "1orders",
		"OrderCacheSize":                "-1",
		"LogFormat":                     "xml",
	}))
	if err == nil {
		t.Fatal("bad settings accepted")
	}
	for _, name := range []string{"FUNCTIONS_CUSTOMHANDLER_PORT", "ServiceBusConnection:", "StateStorage__tableServiceUri",
		"OrdersQueueName", "OrdersTableName", "OrderCacheSize", "LogFormat"} {
		if !strings.Contains(err.Error(), "setting "+name) {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
	_, err = settings.Load(env(nil))
	if err == nil || !strings.Contains(err.Error(), "setting ServiceBusConnection") || !strings.Contains(err.Error(), "setting StateStorage") {
		t.Fatalf("missing connections: %v", err)
	}
	_, err = settings.Load(env(map[string]string{"ServiceBusConnection": sbConn, "StateStorage": "AccountName=x;AccountKey=SECRETSECRETSECRET;junk"}))
	if err == nil || strings.Contains(err.Error(), "SECRETSECRETSECRET") {
		t.Fatalf("a malformed connection string must be rejected without echoing secrets: %v", err)
	}
}

// TestEmulatorConnection: the local emulation is reached with the Service Bus
// emulator's connection string, refused in Azure; local:// is gone, with a
// message that says what to use instead.
func TestEmulatorConnection(t *testing.T) {
	const emulator = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
	s, err := settings.Load(env(map[string]string{"ServiceBusConnection": emulator, "StateStorage": "UseDevelopmentStorage=true"}))
	if err != nil || s.ServiceBus.ConnectionString != emulator || s.ServiceBus.UsesIdentity() {
		t.Fatalf("emulator connection: %+v, %v", s.ServiceBus, err)
	}
	_, err = settings.Load(env(map[string]string{"ServiceBusConnection": emulator, "StateStorage": "UseDevelopmentStorage=true", "WEBSITE_INSTANCE_ID": "x"}))
	if err == nil || !strings.Contains(err.Error(), "refused in Azure") {
		t.Fatalf("the emulator in Azure: %v", err)
	}
	_, err = settings.Load(env(map[string]string{"ServiceBusConnection": "local://127.0.0.1:7071", "StateStorage": "UseDevelopmentStorage=true"}))
	if err == nil || !strings.Contains(err.Error(), "UseDevelopmentEmulator=true") {
		t.Fatalf("local:// accepted or not explained: %v", err)
	}
}

func TestPublisherSettings(t *testing.T) {
	base := map[string]string{"ServiceBusConnection": sbConn, "StateStorage": "UseDevelopmentStorage=true"}
	s, err := settings.Load(env(base))
	if err != nil || s.Default().MaxMessageBytes != 256<<10 || s.Default().QueuePartitioned || s.MaxTransactions != 200_000 {
		t.Fatalf("publisher defaults: %+v, %v", s, err)
	}
	base["OrdersMaxMessageBytes"], base["OrdersQueuePartitioned"], base["MaxLedgerTransactions"] = "1048576", "true", "5000"
	if s, err = settings.Load(env(base)); err != nil || s.Default().MaxMessageBytes != 1<<20 || !s.Default().QueuePartitioned || s.MaxTransactions != 5000 {
		t.Fatalf("publisher settings: %+v, %v", s, err)
	}
	base["OrdersQueuePartitioned"] = "yes"
	if _, err = settings.Load(env(base)); err == nil || !strings.Contains(err.Error(), "setting OrdersQueuePartitioned") {
		t.Fatalf("OrdersQueuePartitioned=yes: %v", err)
	}
	// The publish command needs no StateStorage unless it writes state itself.
	if _, err := settings.LoadForClient(env(map[string]string{"ServiceBusConnection": sbConn}), false); err != nil {
		t.Fatalf("publish without StateStorage: %v", err)
	}
	if _, err := settings.LoadForClient(env(map[string]string{"ServiceBusConnection": sbConn}), true); err == nil {
		t.Fatal("publish --direct without StateStorage accepted")
	}
}

// On Flex Consumption WEBSITE_INSTANCE_ID may be missing: the platform is
// recognised by what Flex sets, and logs are JSON there.
func TestLogFormatOnFlex(t *testing.T) {
	for _, azure := range []map[string]string{
		{"WEBSITE_INSTANCE_ID": "abc"},
		{"WEBSITE_SKU": "FlexConsumption"},
		{"LEGION_SERVICE_HOST": "10.0.0.1"},
	} {
		azure["FUNCTIONS_CUSTOMHANDLER_PORT"] = "34567"
		azure["ServiceBusConnection__fullyQualifiedNamespace"] = "convoy.servicebus.windows.net"
		azure["StateStorage__tableServiceUri"] = "https://convoy.table.core.windows.net/"
		s, err := settings.Load(env(azure))
		if err != nil {
			t.Fatal(err)
		}
		if s.LogFormat != "json" {
			t.Errorf("%v: LogFormat %q, want json", azure, s.LogFormat)
		}
		azure["ServiceBusConnection"] = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"
		if _, err := settings.Load(env(azure)); err == nil {
			t.Errorf("%v: the emulator accepted in Azure", azure)
		}
	}
}

func TestAutoReplaySettings(t *testing.T) {
	base := map[string]string{"ServiceBusConnection": sbConn, "StateStorage": "UseDevelopmentStorage=true"}
	s, err := settings.Load(env(base))
	if a := s.AutoReplay; err != nil || !a.Enabled || a.Schedule != "0 */1 * * * *" || a.BackoffBase != time.Minute ||
		a.BackoffMax != time.Hour || a.BreakerBase != time.Minute || a.MaxOrders != 1000 || a.BlockedPerRun != 5000 || s.LagPerRun != 10000 {
		t.Fatalf("defaults: %+v, lag survey %d a run, %v", s.AutoReplay, s.LagPerRun, err)
	}
	with := func(kv map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range kv {
			m[k] = v
		}
		return m
	}
	s, err = settings.Load(env(with(map[string]string{"AutoReplayEnabled": "FALSE", "AutoReplaySchedule": "*/2 * * * * *",
		"AutoReplayBackoffSeconds": "2", "AutoReplayBackoffMaxSeconds": "8", "AutoReplayBreakerSeconds": "3", "AutoReplayMaxOrders": "7",
		"AutoReplayBlockedPerRun": "50", "LagSurveyOrdersPerRun": "60"})))
	if a := s.AutoReplay; err != nil || a.Enabled || a.Schedule != "*/2 * * * * *" || a.BackoffBase != 2*time.Second ||
		a.BackoffMax != 8*time.Second || a.BreakerBase != 3*time.Second || a.MaxOrders != 7 || a.BlockedPerRun != 50 || s.LagPerRun != 60 {
		t.Fatalf("set: %+v, lag survey %d a run, %v", s.AutoReplay, s.LagPerRun, err)
	}
	_, err = settings.Load(env(with(map[string]string{"AutoReplayEnabled": "yes", "AutoReplaySchedule": "00:05:00",
		"AutoReplayBackoffSeconds": "100", "AutoReplayBackoffMaxSeconds": "10", "AutoReplayBreakerSeconds": "999999", "AutoReplayMaxOrders": "0",
		"AutoReplayBlockedPerRun": "-1", "LagSurveyOrdersPerRun": "many"})))
	for _, name := range []string{"AutoReplayEnabled", "AutoReplaySchedule", "TimeSpan", "AutoReplayBackoffMaxSeconds", "AutoReplayBreakerSeconds", "AutoReplayMaxOrders",
		"AutoReplayBlockedPerRun", "LagSurveyOrdersPerRun"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
}

func TestLagWindowSetting(t *testing.T) {
	base := map[string]string{"ServiceBusConnection": sbConn, "StateStorage": "UseDevelopmentStorage=true"}
	if s, err := settings.Load(env(base)); err != nil || s.LagWindow != 300*time.Second {
		t.Fatalf("default: %v, %v; want 5m0s", s.LagWindow, err)
	}
	base["LagWindowSeconds"] = "20"
	if s, err := settings.Load(env(base)); err != nil || s.LagWindow != 20*time.Second {
		t.Fatalf("20: %v, %v", s.LagWindow, err)
	}
	for _, bad := range []string{"0", "-5", "five", "1.5", "86401"} {
		base["LagWindowSeconds"] = bad
		if _, err := settings.Load(env(base)); err == nil || !strings.Contains(err.Error(), "setting LagWindowSeconds") {
			t.Errorf("LagWindowSeconds %q: error %v, want one that names the setting", bad, err)
		}
	}
}

// Every registered domain reads its own settings, named after it, with
// defaults named after it, and no two share a queue or a table.
func TestDomainSettings(t *testing.T) {
	base := map[string]string{"ServiceBusConnection": sbConn, "StateStorage": "UseDevelopmentStorage=true"}
	s, err := settings.Load(env(base))
	if err != nil {
		t.Fatal(err)
	}
	accounts, ok := s.Domain("accounts")
	if !ok || accounts.Queue != "accounts" || accounts.Table != "ConvoyAccounts" || accounts.MaxMessageBytes != 256<<10 {
		t.Fatalf("accounts' defaults: %+v (found %v)", accounts, ok)
	}
	base["AccountsQueueName"], base["AccountsTableName"], base["AccountsMaxMessageBytes"] = "acc-q", "Accounts2", "1048576"
	if s, err = settings.Load(env(base)); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Domain("accounts"); a.Queue != "acc-q" || a.Table != "Accounts2" || a.MaxMessageBytes != 1<<20 || s.Default().MaxMessageBytes != 256<<10 {
		t.Fatalf("accounts' settings: %+v; orders': %+v", a, s.Default())
	}
	base["AccountsQueueName"], base["AccountsTableName"] = "orders", "convoyorders"
	_, err = settings.Load(env(base))
	for _, want := range []string{"setting AccountsQueueName: must differ from OrdersQueueName", "setting AccountsTableName: must differ from OrdersTableName"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a queue and a table shared with orders: %v, want %q", err, want)
		}
	}
}

// named is a domain whose Name and Noun are given (the rest is the
// accounts').
type named struct {
	keyed.Domain
	name, noun string
}

func (n named) Name() string { return n.name }
func (n named) Noun() string { return n.noun }

// A domain's Name and Noun name its resources: anything but lower-case
// letters and digits is refused at once, naming the rule.
func TestDomainNames(t *testing.T) {
	base := env(map[string]string{"ServiceBusConnection": sbConn, "StateStorage": "UseDevelopmentStorage=true"})
	if _, err := settings.LoadDomains(base, []keyed.Domain{named{accounts.Domain, "meters2", "meter"}}); err != nil {
		t.Fatalf("meters2/meter: %v", err)
	}
	for _, bad := range []named{{accounts.Domain, "smart-meters", "meter"}, {accounts.Domain, "Parcels", "parcel"},
		{accounts.Domain, "2fa", "code"}, {accounts.Domain, "parcels", ""}, {accounts.Domain, "parcels", "par cel"}} {
		_, err := settings.LoadDomains(base, []keyed.Domain{bad})
		if err == nil || !strings.Contains(err.Error(), "must be 1 to 40 lower-case letters and digits") {
			t.Errorf("%s/%s: %v, want the naming rule", bad.name, bad.noun, err)
		}
	}
}
