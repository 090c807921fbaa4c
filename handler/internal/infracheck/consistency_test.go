package infracheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/settings"
)

// appSettings are the function app's app settings as deployed.
func appSettings(t *testing.T, d deployFiles) map[string]string {
	t.Helper()
	app, err := deployedAppSettings(d)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

var bindingExpression = regexp.MustCompile(`^%([A-Za-z0-9_]+)%$`)

// TestQueuesAgree: every Service Bus trigger's queue, resolved through its
// app setting, exists in Bicep and in the local emulator config with the
// same properties, and is the program's default; there is one per
// registered domain and the ledgers'.
func TestQueuesAgree(t *testing.T) {
	d := loadDeploy(t)
	dep := deploy(d, "convoy-dev")
	app := appSettings(t, d)
	queues := dep.ofType("Microsoft.ServiceBus/namespaces/queues")
	local, err := devhost.LoadQueueConfig(filepath.Join(root, emulatorConfig))
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{"LedgersQueueName": settings.DefaultLedgersQueue}
	for _, dom := range domains.All {
		defaults[settings.QueueSetting(dom)] = settings.DefaultQueue(dom)
	}
	fns, errs := d.functions()
	for _, e := range errs {
		t.Error(e)
	}
	triggers := 0
	for _, f := range fns {
		for _, b := range f.bindings {
			if b["type"] != "serviceBusTrigger" {
				continue
			}
			triggers++
			if b["connection"] != "ServiceBusConnection" {
				t.Errorf("%s: connection %v, want ServiceBusConnection", f.name, b["connection"])
			}
			queueName, _ := b["queueName"].(string)
			m := bindingExpression.FindStringSubmatch(queueName)
			if m == nil {
				t.Errorf("%s: queueName %v is not a %%Setting%% expression", f.name, b["queueName"])
				continue
			}
			name, ok := app[m[1]]
			if !ok || name != defaults[m[1]] {
				t.Errorf("%s: app setting %s is %q in Bicep, the program's default is %q", f.name, m[1], name, defaults[m[1]])
			}
			q, ok := queues[name]
			if !ok {
				t.Errorf("%s: queue %q is not created by Bicep", f.name, name)
				continue
			}
			l, ok := local[name]
			if !ok {
				t.Errorf("%s: queue %q is missing from %s", f.name, name, emulatorConfig)
			}
			sessions, _ := b["isSessionsEnabled"].(bool)
			got := q.str("properties", "requiresSession") == "true"
			if l.RequiresSession != sessions {
				t.Errorf("%s: isSessionsEnabled %v, local RequiresSession %v", f.name, sessions, l.RequiresSession)
			}
			if got != sessions {
				t.Errorf("%s: isSessionsEnabled %v, Bicep requiresSession %v", f.name, sessions, got)
			}
			if !sessions {
				t.Errorf("%s: a queue's messages are ordered per key (per stream for ledgers) only by a session (docs/contract.md): isSessionsEnabled must be true", f.name)
			}
			if mdc := q.str("properties", "maxDeliveryCount"); mdc != strconv.Itoa(l.MaxDeliveryCount) {
				t.Errorf("queue %s: maxDeliveryCount %s in Bicep, %d locally", name, mdc, l.MaxDeliveryCount)
			}
			if dd := q.str("properties", "requiresDuplicateDetection") == "true"; !dd || !l.RequiresDuplicateDetection {
				t.Errorf("queue %s: duplicate detection must be on in Bicep and locally", name)
			}
			if w := q.str("properties", "duplicateDetectionHistoryTimeWindow"); w != isoMinutes(l.DuplicateDetectionWindow) {
				t.Errorf("queue %s: duplicate detection window %s in Bicep, %s locally", name, w, l.DuplicateDetectionWindow)
			}
			if w := q.str("properties", "lockDuration"); w != isoMinutes(l.LockDuration) {
				t.Errorf("queue %s: lock duration %s in Bicep, %s locally", name, w, l.LockDuration)
			}
		}
	}
	if triggers != 1+len(domains.All) {
		t.Errorf("%d Service Bus triggers, want %d (LedgerIngest and a processor per registered domain)", triggers, 1+len(domains.All))
	}
}

// isoMinutes writes a whole number of minutes as Bicep does: PT10M.
func isoMinutes(d time.Duration) string {
	return "PT" + strings.TrimSuffix(strings.ToUpper(d.String()), "0S")
}

// TestSettingsAgree: the app settings Bicep gives the function app are read
// by the program as identity-based connections, with the queues and tables
// Bicep creates for each registered domain, under the program's defaults.
func TestSettingsAgree(t *testing.T) {
	d := loadDeploy(t)
	dep := deploy(d, "convoy-dev")
	app := appSettings(t, d)
	env := map[string]string{"WEBSITE_SKU": "FlexConsumption"} // Flex may not set WEBSITE_INSTANCE_ID
	for k, v := range app {
		if v == "<expr>" { // what the expressions evaluate to in Azure
			switch {
			case k == "ServiceBusConnection__fullyQualifiedNamespace":
				v = "sb-convoy-dev-abc.servicebus.windows.net"
			case k == "StateStorage__tableServiceUri":
				v = "https://stconvoydev.table.core.windows.net/"
			case strings.HasSuffix(k, "MaxMessageBytes"):
				v = "262144"
			default:
				v = "00000000-0000-0000-0000-000000000001" // client ids, names
			}
		}
		env[k] = v
	}
	cfg, err := settings.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the program refuses the app settings Bicep sets:\n%v", err)
	}
	if cfg.LogFormat != "json" {
		t.Errorf("LogFormat %q in Azure, want json", cfg.LogFormat)
	}
	if !cfg.ServiceBus.UsesIdentity() || cfg.ServiceBus.ClientID == "" || !cfg.Storage.UsesIdentity() || cfg.Storage.ClientID == "" {
		t.Fatalf("connections are not identity-based with the user-assigned identity: %+v %+v", cfg.ServiceBus, cfg.Storage)
	}
	for _, k := range []string{"AzureWebJobsStorage__blobServiceUri", "AzureWebJobsStorage__credential", "AzureWebJobsStorage__clientId",
		"ServiceBusConnection__credential", "StateStorage__credential", "APPLICATIONINSIGHTS_AUTHENTICATION_STRING"} {
		if _, ok := app[k]; !ok {
			t.Errorf("Bicep does not set %s", k)
		}
	}
	tables := dep.ofType("Microsoft.Storage/storageAccounts/tableServices/tables")
	queues := dep.ofType("Microsoft.ServiceBus/namespaces/queues")
	if _, ok := tables[cfg.LedgersTable]; !ok || cfg.LedgersTable != settings.DefaultLedgersTable {
		t.Errorf("ledgers table %q: created by Bicep %v, the program's default %q", cfg.LedgersTable, ok, settings.DefaultLedgersTable)
	}
	if len(cfg.Domains) != len(domains.All) {
		t.Fatalf("the program reads %d domains, %d are registered", len(cfg.Domains), len(domains.All))
	}
	for _, dom := range cfg.Domains {
		if _, ok := tables[dom.Table]; !ok || dom.Table != settings.DefaultTable(dom.Rules) {
			t.Errorf("domain %s: table %q: created by Bicep %v, the program's default %q", dom.Name(), dom.Table, ok, settings.DefaultTable(dom.Rules))
		}
		if _, ok := queues[dom.Queue]; !ok || dom.Queue != settings.DefaultQueue(dom.Rules) {
			t.Errorf("domain %s: queue %q: created by Bicep %v, the program's default %q", dom.Name(), dom.Queue, ok, settings.DefaultQueue(dom.Rules))
		}
		if app[settings.Prefix(dom.Rules)+"MaxMessageBytes"] == "" {
			t.Errorf("domain %s: Bicep does not set %sMaxMessageBytes (its queue's limit: Premium's is larger)", dom.Name(), settings.Prefix(dom.Rules))
		}
	}
}

// Built-in role definition ids.
var roleIDs = map[string]string{
	"serviceBusDataOwner":         "090c5cfd-751d-490a-894a-3ce6f1109419",
	"serviceBusDataReceiver":      "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0",
	"serviceBusDataSender":        "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39",
	"storageTableDataContributor": "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
	"storageBlobDataOwner":        "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
	"monitoringMetricsPublisher":  "3913510d-42f4-4e42-8a64-420c390055eb",
}

var roleRef = regexp.MustCompile(`roles\.([A-Za-z]+)`)

// TestRolesAreLeastPrivilege: the function app's identity, and the deploying
// user, have exactly the roles their work needs, each on the narrowest scope:
// the same on every registered domain's queue and table.
func TestRolesAreLeastPrivilege(t *testing.T) {
	d := loadDeploy(t)
	f := d.bicep["infra/modules/roles.bicep"]
	if f == nil {
		t.Fatal("infra/modules/roles.bicep is missing")
	}
	for _, e := range checkRoleIDs(f) {
		t.Error(e)
	}
	all, errs := roleAssignments(d)
	for _, e := range errs {
		t.Error(e)
	}
	want := map[string]bool{
		"appPrincipalId serviceBusDataOwner on ledgers":                                  true, // LedgerIngest's trigger (Manage: target-based scaling)
		"appPrincipalId storageTableDataContributor on " + settings.DefaultLedgersTable:  true,
		"appPrincipalId storageBlobDataOwner on <storage account>":                       true,
		"appPrincipalId monitoringMetricsPublisher on <application insights>":            true,
		"userPrincipalId serviceBusDataSender on ledgers":                                true, // convoy publish
		"userPrincipalId storageTableDataContributor on " + settings.DefaultLedgersTable: true,
	}
	for _, dom := range domains.All {
		q, table := settings.DefaultQueue(dom), settings.DefaultTable(dom)
		want["appPrincipalId serviceBusDataOwner on "+q] = true // its processor's trigger, the publisher, its replay
		want["appPrincipalId storageTableDataContributor on "+table] = true
		want["userPrincipalId serviceBusDataSender on "+q] = true            // convoy replay re-sends
		want["userPrincipalId serviceBusDataReceiver on "+q] = true          // and reads dead letters
		want["userPrincipalId storageTableDataContributor on "+table] = true // --direct
	}
	got := map[string]bool{}
	for _, a := range all {
		scope := a.scope
		switch { // account and component names are known only in Azure
		case a.role == "storageBlobDataOwner" && strings.HasPrefix(scope, "param:"):
			scope = "<storage account>"
		case a.role == "monitoringMetricsPublisher" && strings.HasPrefix(scope, "param:"):
			scope = "<application insights>"
		}
		k := a.principal + " " + a.role + " on " + scope
		if got[k] {
			t.Errorf("%s is assigned twice", k)
		}
		got[k] = true
	}
	for k := range want {
		if !got[k] {
			t.Errorf("missing: %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("%s, which nothing needs", k)
		}
	}
}

// TestHostJSON: the choices the README explains, and the binary the stage ships.
func TestHostJSON(t *testing.T) {
	var h struct {
		FunctionTimeout string `json:"functionTimeout"`
		Logging         struct {
			LogLevel map[string]string `json:"logLevel"`
		} `json:"logging"`
		ExtensionBundle struct {
			ID, Version string
		} `json:"extensionBundle"`
		CustomHandler struct {
			Description struct {
				DefaultExecutablePath string `json:"defaultExecutablePath"`
			} `json:"description"`
		} `json:"customHandler"`
		Extensions struct {
			ServiceBus map[string]any `json:"serviceBus"`
		} `json:"extensions"`
	}
	data, _ := os.ReadFile(filepath.Join(root, "host.json"))
	if err := json.Unmarshal(data, &h); err != nil {
		t.Fatal(err)
	}
	makefile, _ := os.ReadFile(filepath.Join(root, "Makefile"))
	bin := regexp.MustCompile(`(?m)^BINARY\s*:=\s*bin/(\S+)`).FindSubmatch(makefile)
	if bin == nil || h.CustomHandler.Description.DefaultExecutablePath != string(bin[1]) {
		t.Errorf("host.json runs %q; the Makefile stages %q", h.CustomHandler.Description.DefaultExecutablePath, bin)
	}
	if h.ExtensionBundle.ID != "Microsoft.Azure.Functions.ExtensionBundle" || h.ExtensionBundle.Version != "[4.*, 5.0.0)" {
		t.Errorf("extension bundle %+v", h.ExtensionBundle)
	}
	sb := h.Extensions.ServiceBus
	// Both triggers use sessions; maxConcurrentCalls (non-session triggers only) stays 1 in case one is added.
	if sb["prefetchCount"] != 0.0 || sb["autoCompleteMessages"] != true || sb["maxConcurrentCallsPerSession"] != 1.0 || sb["maxConcurrentCalls"] != 1.0 {
		t.Errorf("serviceBus settings break per-session FIFO: %v", sb)
	}
	timeout, _ := time.ParseDuration(strings.Replace(strings.Replace(h.FunctionTimeout, ":", "h", 1), ":", "m", 1) + "s")
	if timeout <= settings.DefaultRetryBudget {
		t.Errorf("functionTimeout %s must exceed the retry budget (%s)", timeout, settings.DefaultRetryBudget)
	}
	// The renewal budget runs from a session's acceptance, not per call: any
	// finite value loses the lock of a session kept busy longer (a backlog).
	if sb["maxAutoLockRenewalDuration"] != "-00:00:00.0010000" {
		t.Errorf("maxAutoLockRenewalDuration %v: want Timeout.InfiniteTimeSpan (-00:00:00.0010000)", sb["maxAutoLockRenewalDuration"])
	}
	// The lines operators rely on: successful calls' Logs (Function.<Name>.User)
	// at Information, stderr (Host.Function.Console) at Warning.
	if lv := h.Logging.LogLevel; lv["Function"] != "Information" || lv["Host.Function.Console"] != "Warning" {
		t.Errorf("logging.logLevel %v drops what operators rely on", lv)
	}
}

// secretPatterns are what no template may hold.
var secretPatterns = regexp.MustCompile(`(?i)(AccountKey\s*=|SharedAccessKey\s*=|SharedAccessSignature\s*=|listKeys\s*\(|listConnectionStrings\s*\(|primaryConnectionString|primaryKey|DefaultEndpointsProtocol=|password\s*[:=]\s*['"][^'"$]+['"])`)

// TestNoSecretsInTemplates: identity everywhere, no key in any template, and
// local (key) authentication switched off where Azure allows it.
func TestNoSecretsInTemplates(t *testing.T) {
	var scanned int
	_ = filepath.WalkDir(filepath.Join(root, "infra"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := os.ReadFile(path)
		if m := secretPatterns.Find(data); m != nil {
			t.Errorf("%s holds %q", path, m)
		}
		scanned++
		return nil
	})
	for _, extra := range []string{"azure.yaml", "host.json"} {
		data, _ := os.ReadFile(filepath.Join(root, extra))
		if m := secretPatterns.Find(data); m != nil {
			t.Errorf("%s holds %q", extra, m)
		}
	}
	if scanned < 8 {
		t.Fatalf("scanned %d files under infra/", scanned)
	}
	if !secretPatterns.MatchString("AccountName=x;AccountKey=abc") || !secretPatterns.MatchString("password: 'hunter2'") {
		t.Fatal("the secret patterns do not match secrets")
	}
	files := loadBicep(t)
	check := func(typ string, path []string, want string) {
		rs := ofType(files, typ)
		if len(rs) == 0 {
			t.Errorf("no %s", typ)
		}
		for _, r := range rs {
			if got := r.literal(path...); got != want {
				t.Errorf("%s %s: %s is %q, want %s", r.file.path, r.symbol, strings.Join(path, "."), got, want)
			}
		}
	}
	check("Microsoft.ServiceBus/namespaces", []string{"properties", "disableLocalAuth"}, "true")
	check("Microsoft.ServiceBus/namespaces", []string{"properties", "minimumTlsVersion"}, "1.2")
	check("Microsoft.Storage/storageAccounts", []string{"properties", "allowSharedKeyAccess"}, "false")
	check("Microsoft.Storage/storageAccounts", []string{"properties", "allowBlobPublicAccess"}, "false")
	check("Microsoft.Storage/storageAccounts", []string{"properties", "minimumTlsVersion"}, "TLS1_2")
	check("Microsoft.Insights/components", []string{"properties", "DisableLocalAuth"}, "true")
}
