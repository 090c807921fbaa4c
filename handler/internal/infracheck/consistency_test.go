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

	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/settings"
)

// appSettings returns the function app's app settings declared in Bicep:
// literal values as they are, expressions as "<expr>".
func appSettings(t *testing.T, files map[string]*bicepFile) map[string]string {
	t.Helper()
	for _, r := range ofType(files, "Microsoft.Web/sites/config") {
		if r.literal("name") != "appsettings" {
			continue
		}
		out := map[string]string{}
		for k, v := range props(r.prop("properties"), r.file.src) {
			if s, ok := literal(v, r.file.src); ok {
				out[k] = s
			} else {
				out[k] = "<expr>"
			}
		}
		return out
	}
	t.Fatal("no Microsoft.Web/sites/config 'appsettings' in the Bicep files")
	return nil
}

// namedResources maps literal names to resources of a type.
func namedResources(files map[string]*bicepFile, typ string) map[string]resource {
	out := map[string]resource{}
	for _, r := range ofType(files, typ) {
		if name, ok := literal(r.prop("name"), r.file.src); ok {
			out[name] = r
		}
	}
	return out
}

type functionJSON struct {
	name     string
	bindings []map[string]any
}

func functions(t *testing.T) []functionJSON {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	if len(files) == 0 {
		t.Fatal("no functions/*/function.json")
	}
	var out []functionJSON
	for _, f := range files {
		var fj struct {
			Bindings []map[string]any `json:"bindings"`
		}
		data, _ := os.ReadFile(f)
		if err := json.Unmarshal(data, &fj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, functionJSON{name: filepath.Base(filepath.Dir(f)), bindings: fj.Bindings})
	}
	return out
}

var bindingExpression = regexp.MustCompile(`^%([A-Za-z0-9_]+)%$`)

// TestQueuesAgree: every Service Bus trigger's queue, resolved through its
// app setting, exists in Bicep and in the local emulator config with the
// same properties, and is the program's default.
func TestQueuesAgree(t *testing.T) {
	files := loadBicep(t)
	app := appSettings(t, files)
	queues := namedResources(files, "Microsoft.ServiceBus/namespaces/queues")
	local, err := devhost.LoadQueueConfig(filepath.Join(root, "infra", "local", "servicebus-emulator-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{"OrdersQueueName": settings.DefaultOrdersQueue, "LedgersQueueName": settings.DefaultLedgersQueue}
	triggers := 0
	for _, f := range functions(t) {
		for _, b := range f.bindings {
			if b["type"] != "serviceBusTrigger" {
				continue
			}
			triggers++
			if b["connection"] != "ServiceBusConnection" {
				t.Errorf("%s: connection %v, want ServiceBusConnection", f.name, b["connection"])
			}
			m := bindingExpression.FindStringSubmatch(b["queueName"].(string))
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
				t.Errorf("%s: queue %q is missing from infra/local/servicebus-emulator-config.json", f.name, name)
			}
			sessions, _ := b["isSessionsEnabled"].(bool)
			got := q.literal("properties", "requiresSession") == "true"
			if l.RequiresSession != sessions {
				t.Errorf("%s: isSessionsEnabled %v, local RequiresSession %v", f.name, sessions, l.RequiresSession)
			}
			if got != sessions {
				t.Errorf("%s: isSessionsEnabled %v, Bicep requiresSession %v", f.name, sessions, got)
			}
			if f.name == "LedgerIngest" && !sessions {
				t.Errorf("%s: the ledgers of a stream are ordered only by a session (docs/contract.md): isSessionsEnabled must be true", f.name)
			}
			if mdc := q.literal("properties", "maxDeliveryCount"); mdc != strconv.Itoa(l.MaxDeliveryCount) {
				t.Errorf("queue %s: maxDeliveryCount %s in Bicep, %d locally", name, mdc, l.MaxDeliveryCount)
			}
			if dd := q.literal("properties", "requiresDuplicateDetection") == "true"; !dd || !l.RequiresDuplicateDetection {
				t.Errorf("queue %s: duplicate detection must be on in Bicep and locally", name)
			}
			if w := q.literal("properties", "duplicateDetectionHistoryTimeWindow"); w != "PT"+strings.TrimSuffix(strings.ToUpper(l.DuplicateDetectionWindow.String()), "0S") {
				t.Errorf("queue %s: duplicate detection window %s in Bicep, %s locally", name, w, l.DuplicateDetectionWindow)
			}
		}
	}
	if triggers != 2 {
		t.Errorf("%d Service Bus triggers, want 2 (LedgerIngest, OrderProcessor)", triggers)
	}
}

// TestSettingsAgree: the app settings Bicep gives the function app are read
// by the program as identity-based connections, with the tables Bicep creates.
func TestSettingsAgree(t *testing.T) {
	files := loadBicep(t)
	app := appSettings(t, files)
	sample := map[string]string{ // what the expressions evaluate to in Azure
		"ServiceBusConnection__fullyQualifiedNamespace": "sb-convoy-dev-abc.servicebus.windows.net",
		"StateStorage__tableServiceUri":                 "https://stconvoydev.table.core.windows.net/",
		"OrdersMaxMessageBytes":                         "262144",
	}
	env := map[string]string{"WEBSITE_SKU": "FlexConsumption"} // Flex may not set WEBSITE_INSTANCE_ID
	for k, v := range app {
		if v == "<expr>" {
			v = sample[k]
			if v == "" {
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
	tables := namedResources(files, "Microsoft.Storage/storageAccounts/tableServices/tables")
	for _, name := range []string{cfg.OrdersTable, cfg.LedgersTable} {
		if _, ok := tables[name]; !ok {
			t.Errorf("table %q (the program's setting) is not created by Bicep", name)
		}
	}
	if cfg.OrdersTable != settings.DefaultOrdersTable || cfg.LedgersTable != settings.DefaultLedgersTable {
		t.Errorf("Bicep names tables %s, %s; the program's defaults are %s, %s", cfg.OrdersTable, cfg.LedgersTable, settings.DefaultOrdersTable, settings.DefaultLedgersTable)
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

// TestRolesAreLeastPrivilege: the function app's identity has exactly the
// roles its functions need, each on the narrowest scope.
func TestRolesAreLeastPrivilege(t *testing.T) {
	files := loadBicep(t)
	f := files["infra/modules/roles.bicep"]
	if f == nil {
		t.Fatal("infra/modules/roles.bicep is missing")
	}
	for _, e := range checkRoleIDs(f) {
		t.Error(e)
	}
	got, errs := appRoleAssignments(deployFiles{bicep: files})
	for _, e := range errs {
		t.Error(e)
	}
	want := map[string]bool{
		"serviceBusDataOwner on ledgers":                                 true, // LedgerIngest's trigger (Manage: target-based scaling)
		"serviceBusDataOwner on orders":                                  true, // OrderProcessor's trigger, the publisher, ReplayOrder
		"storageTableDataContributor on " + settings.DefaultOrdersTable:  true,
		"storageTableDataContributor on " + settings.DefaultLedgersTable: true,
		"storageBlobDataOwner on <storage account>":                      true,
		"monitoringMetricsPublisher on <application insights>":           true,
	}
	for k := range got { // account and component names are parameters
		if strings.HasPrefix(k, "storageBlobDataOwner on ") && !strings.Contains(k, "Convoy") {
			delete(got, k)
			got["storageBlobDataOwner on <storage account>"] = true
		}
		if strings.HasPrefix(k, "monitoringMetricsPublisher on ") {
			delete(got, k)
			got["monitoringMetricsPublisher on <application insights>"] = true
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("the function app lacks %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("the function app has %s, which no function needs", k)
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
