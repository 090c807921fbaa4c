package infracheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	ts "github.com/tree-sitter/go-tree-sitter"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/heal"
)

// The rules of this file catch, without Azure, what would make a user's first
// `make provision` / `azd up` fail or deploy wrong. Each rule is a function of
// the repository's deployment files that returns its findings; TestDeployRules
// runs every rule on the files as they are (no finding allowed) and on a
// mutation of them that reintroduces the mistake (a finding required), so
// that no rule can pass vacuously.

// deployFiles are the files the rules read: every Bicep file, parsed, and the
// other files of the deployment path as text.
type deployFiles struct {
	bicep map[string]*bicepFile
	text  map[string][]byte
}

var deployText = []string{"infra/main.parameters.json", "azure.yaml", "Makefile", emulatorConfig}

// emulatorConfig is the local Service Bus emulator's queues.
const emulatorConfig = "infra/local/servicebus-emulator-config.json"

// loadDeploy reads the deployment files, and the functions/<Name>/function.json
// files the app is published with (text, under their paths).
func loadDeploy(t *testing.T) deployFiles {
	t.Helper()
	d := deployFiles{bicep: loadBicep(t), text: map[string][]byte{}}
	fns, _ := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	if len(fns) == 0 {
		t.Fatal("no functions/*/function.json")
	}
	paths := slices.Clone(deployText)
	for _, f := range fns {
		rel, _ := filepath.Rel(root, f)
		paths = append(paths, filepath.ToSlash(rel))
	}
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		d.text[p] = data
	}
	return d
}

// functionJSON is one function's bindings.
type functionJSON struct {
	name     string
	bindings []map[string]any
}

// functions are the function.json files of the deployment, by folder name.
func (d deployFiles) functions() (map[string]functionJSON, []string) {
	out := map[string]functionJSON{}
	var errs []string
	for p, data := range d.text {
		dir, file := filepath.Split(p)
		if !strings.HasPrefix(p, "functions/") || file != "function.json" {
			continue
		}
		var fj struct {
			Bindings []map[string]any `json:"bindings"`
		}
		if err := json.Unmarshal(data, &fj); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		name := filepath.Base(dir)
		out[name] = functionJSON{name: name, bindings: fj.Bindings}
	}
	return out, errs
}

// mutate returns a copy with old replaced by new in one file; old must occur
// exactly once, so that a mutation that no longer applies fails loudly.
func (d deployFiles) mutate(t *testing.T, path, old, new string) deployFiles {
	t.Helper()
	out := deployFiles{bicep: maps.Clone(d.bicep), text: maps.Clone(d.text)}
	var src []byte
	if f, ok := d.bicep[path]; ok {
		src = f.src
	} else if src, ok = d.text[path]; !ok {
		t.Fatalf("mutation of unknown file %s", path)
	}
	if n := strings.Count(string(src), old); n != 1 {
		t.Fatalf("mutation: %q occurs %d times in %s, want once", old, n, path)
	}
	changed := []byte(strings.Replace(string(src), old, new, 1))
	if _, ok := d.bicep[path]; ok {
		out.bicep[path] = &bicepFile{path: path, src: changed, tree: parseBicep(changed)}
		if where := syntaxError(out.bicep[path].tree, changed); where != "" {
			t.Fatalf("mutation breaks the syntax of %s at %s", path, where)
		}
	} else {
		out.text[path] = changed
	}
	return out
}

type mutation struct{ path, old, new string }

type deployRule struct {
	name      string
	check     func(deployFiles) []string
	mutations []mutation // each must make check report something
}

var deployRules = []deployRule{
	{"Flex refuses no property or setting of the app", checkFlexRefused, []mutation{
		{"infra/modules/functionapp.bicep", "minTlsVersion: '1.2'\n", "minTlsVersion: '1.2'\n      ftpsState: 'Disabled'\n"},
		{"infra/modules/functionapp.bicep", "    LogFormat: 'json'\n", "    LogFormat: 'json'\n    FUNCTIONS_WORKER_RUNTIME: 'custom'\n"},
		{"infra/modules/functionapp.bicep", "httpsOnly: true", "httpsOnly: false"},
		{"infra/modules/functionapp.bicep", "minTlsVersion: '1.2'\n", "minTlsVersion: '1.0'\n"},
	}},
	{"generated names fit their resource types for every name azd accepts", checkNames, []mutation{
		{"infra/modules/resources.bicep", "'sb-${fit(base, 33)}-${token}'", "'sb-${fit(base, 40)}-${token}'"},
		{"infra/modules/resources.bicep", "'st${take(alphanumeric, 9)}${token}'", "take('st${alphanumeric}${token}', 24)"},
		{"infra/modules/resources.bicep", "'st${take(alphanumeric, 9)}${token}'", "'st${take(base, 9)}${token}'"},
		{"infra/modules/resources.bicep", "'log-${fit(base, 59)}'", "'log-${take(base, 59)}'"},
		{"infra/modules/resources.bicep", "'func-${fit(base, 46)}-${take(token, 8)}'", "'func-${fit(base, 46)}'"},
		{"infra/main.bicep", "endsWith(environmentName, '.') ? 'rg-${environmentName}0' : 'rg-${environmentName}'", "'rg-${environmentName}'"},
		{"infra/main.bicep", "@maxLength(64)", "@maxLength(40)"},
		// Names made by the alert rules' loop: one breaking the type's rule, two the same, an array the checks cannot expand.
		{"infra/modules/alerts.bicep", "name: 'auto-replay-failing'", "name: 'auto-replay-failing?'"},
		{"infra/modules/alerts.bicep", "name: 'dead-letters-permanent'", "name: 'order-blocked'"},
		{"infra/modules/alerts.bicep", "[for r in rules: {", "[for r in alertRules: {"},
		// A domain whose table name Azure refuses (Convoy<Title(Name)>: no hyphen), two domains with one queue.
		{"infra/main.bicep", "  'accounts'\n", "  'accounts-eu'\n"},
		{"infra/modules/resources.bicep", "  queue: name\n", "  queue: domains[0]\n"},
	}},
	{"the principal type comes from azd and the CLI", checkPrincipalType, []mutation{
		{"infra/main.parameters.json", `    "principalType": { "value": "${AZURE_PRINCIPAL_TYPE}" },` + "\n", ""},
		{"infra/modules/roles.bicep", "    principalId: userPrincipalId\n    principalType: userPrincipalType\n  }\n}\n\nresource userDomainSender", "    principalId: userPrincipalId\n    principalType: 'User'\n  }\n}\n\nresource userDomainSender"},
		{"Makefile", `principalType="$${1:-User}" `, ""},
		{"infra/main.parameters.json", `"serviceBusSku"`, `"serviceBusTier"`},
	}},
	{"hooks run on the right azd events; the publish retries", checkHooks, []mutation{
		{"azure.yaml", "  postdeploy:\n", "  postprovision:\n"},
		{"azure.yaml", "  preprovision:\n", "  predeploy:\n"},
		{"Makefile", "func azure functionapp publish \"$$app\" --custom && exit 0", "func azure functionapp publish \"$$app\" --custom; exit $$?"},
	}},
	{"Flex scale bounds, azd location, endpoints from the resources", checkEndpointsAndBounds, []mutation{
		{"infra/main.bicep", "@minValue(40)", "@minValue(1)"},
		{"infra/main.bicep", "@maxValue(1000)\n", ""},
		{"infra/main.bicep", "@metadata({ azd: { type: 'location' } })\n", ""},
		{"infra/modules/servicebus.bicep", "split(split(replace(namespace.properties.serviceBusEndpoint, 'https://', ''), ':')[0], '/')[0]", "'${namespace.name}.servicebus.windows.net'"},
		{"infra/modules/functionapp.bicep", "AzureWebJobsStorage__blobServiceUri: blobEndpoint", "AzureWebJobsStorage__accountName: 'x'"},
	}},
	{"the log format is set, not guessed", checkLogFormat, []mutation{
		{"infra/modules/functionapp.bicep", "    LogFormat: 'json'\n", ""},
	}},
	{"the app's identity can read the queues' length (target-based scaling)", checkQueueOwner, []mutation{
		{"infra/modules/roles.bicep", "guid(ledgersQueue.id, appPrincipalId, roles.serviceBusDataOwner)\n  scope: ledgersQueue\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)", "guid(ledgersQueue.id, appPrincipalId, roles.serviceBusDataReceiver)\n  scope: ledgersQueue\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)"},
		{"infra/modules/roles.bicep", "serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419'", "serviceBusDataOwner: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'"},
		{"infra/modules/roles.bicep", "  scope: domainQueues[i]\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)\n    principalId: appPrincipalId", "  scope: namespace\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)\n    principalId: appPrincipalId"},
	}},
	{"the ledgers queue has sessions, and an old sessionless one is caught before deploying", checkLedgerSessions, []mutation{
		{"infra/modules/servicebus.bicep", "  name: 'ledgers'\n  properties: {\n    requiresSession: true", "  name: 'ledgers'\n  properties: {\n    requiresSession: false"},
		{"infra/modules/servicebus.bicep", "  name: d.queue\n  properties: {\n    requiresSession: true", "  name: d.queue\n  properties: {\n    requiresSession: false"},
		{"azure.yaml", "make ledgers-precheck", "true"},
		{"Makefile", "@$(MAKE) --no-print-directory ledgers-precheck", "@true"},
	}},
	{"the alert rules match what Application Insights receives and reach the action group", checkAlerts, []mutation{
		{"infra/modules/alerts.bicep", `message startswith "auto-replay paused"`, `message startswith "auto-replay stopped"`},
		{"infra/modules/alerts.bicep", "var category = 'Function.AutoReplay.User'", "var category = 'Host.Function.Console'"},
		{"infra/modules/alerts.bicep", "'Microsoft.Insights/scheduledQueryRules@2023-12-01'", "'Microsoft.Insights/scheduledQueryRules@2024-01-01-preview'"},
		{"infra/modules/alerts.bicep", "actionGroups: empty(alertEmail) ? [] : [ actionGroup.id ]", "actionGroups: []"},
		// A field the metrics line does not have: extract finds nothing, toint gives null, the rule never fires.
		{"infra/modules/alerts.bicep", `extract(@"deadLettersPermanent=(\d+)"`, `extract(@"deadLetterPermanent=(\d+)"`},
		// A query no rule runs.
		{"infra/modules/alerts.bicep", "    query: '${replace(stalledQuery, '{category}', category)}${byDomain}'\n", "    query: '${replace(permanentQuery, '{category}', category)}${byDomain}'\n"},
		// An extract of another shape: its field cannot be checked.
		{"infra/modules/alerts.bicep", "| where deadLettersPermanent > 0\n", "| where deadLettersPermanent > 0\n| where extract(@\"reason=(\\w+)\", 1, message) == \"x\"\n"},
	}},
	{"a heartbeat rule fires when AutoReplay's metrics line is absent", checkHeartbeat, []mutation{
		{"infra/modules/alerts.bicep", "    query: replace(replace(replace(heartbeatKql, '{category}', category), '{byDomain}', byDomain), '{domains}', domainList)\n", "    query: '${replace(failingQuery, '{category}', category)}${byDomain}'\n"},
		// The domains that wrote a line, not those that did not; every trace, not AutoReplay's metrics lines.
		{"infra/modules/alerts.bicep", "join kind=rightanti", "join kind=rightsemi"},
		{"infra/modules/alerts.bicep", "| where message startswith \"metrics \"\n{byDomain}", "{byDomain}"},
		{"infra/modules/alerts.bicep", "operator: 'GreaterThan'", "operator: 'LessThan'"},
		{"infra/modules/alerts.bicep", "windowSize: 'PT15M'", "windowSize: 'PT2M'"},
		{"infra/modules/functionapp.bicep", "AutoReplaySchedule: '0 */1 * * * *'", "AutoReplaySchedule: '0 */30 * * * *'"},
	}},
	{"the workbook charts fields the program writes, and the alerts point to it", checkWorkbook, []mutation{
		// A field renamed in a query: the chart would be empty.
		{"infra/modules/workbook.bicep", `extract(@"lagCatchingUp=(\d+)"`, `extract(@"lagCatchUp=(\d+)"`},
		{"infra/modules/workbook.bicep", `extract(@"criticalTimeMs=(\d+)"`, `extract(@"criticalTime=(\d+)"`},
		// A field of another line: the metrics line has no criticalTimeMs.
		{"infra/modules/workbook.bicep", `extract(@"parkedMessages=(\d+)"`, `extract(@"criticalTimeMs=(\d+)"`},
		// A line under another category, a line the program does not write, a value it never logs.
		{"infra/modules/workbook.bicep", "\"Function.OrderProcessor.User\"\n| where message startswith \"order blocked \"", "\"Function.AutoReplay.User\"\n| where message startswith \"order blocked \""},
		{"infra/modules/workbook.bicep", `| where message startswith "order blocked " or`, `| where message startswith "order block " or`},
		{"infra/modules/workbook.bicep", "| where extract(@\"outcome=(\\w+)\", 1, message) == \"applied\"\n| summarize applied", "| where extract(@\"outcome=(\\w+)\", 1, message) == \"Applied\"\n| summarize applied"},
		// A chart gone; the workbook under another resource; another API version.
		{"infra/modules/workbook.bicep", "    chart('lag', 'Orders by lag status: ok, catching up, stalled, blocked', lagQuery, 'timechart')\n", ""},
		{"infra/modules/workbook.bicep", "sourceId: applicationInsightsId", "sourceId: resourceGroup().id"},
		{"infra/modules/workbook.bicep", "'Microsoft.Insights/workbooks@2023-06-01'", "'Microsoft.Insights/workbooks@2022-04-01'"},
		{"infra/modules/workbook.bicep", "value: { durationMs: 14400000 }", "value: { durationMs: 86400000 }"},
		// The alerts no longer point to the workbook.
		{"infra/modules/alerts.bicep", `see the workbook "${workbookDisplayName}"`, `see the dashboard`},
		{"infra/modules/resources.bicep", "workbookDisplayName: workbook.outputs.displayName", "workbookDisplayName: 'convoy'"},
	}},
	{"every %Setting% of a function.json is an app setting", checkBindingSettings, []mutation{
		{"infra/modules/functionapp.bicep", "    AutoReplaySchedule: '0 */1 * * * *'\n", ""},
		{"infra/modules/functionapp.bicep", "  '${d.prefix}QueueName': d.queue\n", ""},
		{"functions/AccountProcessor/function.json", "%AccountsQueueName%", "%AccountQueueName%"},
	}},
	{"each registered domain has its functions, named and routed as the order domain's", checkDomainFunctions, []mutation{
		{"functions/AccountStatus/function.json", `"route": "accounts/{accountId}"`, `"route": "accounts/{orderId}"`},
		{"functions/BlockedAccounts/function.json", `"methods": ["get"]`, `"methods": ["post"]`},
		{"functions/SkipAccountGap/function.json", `"authLevel": "admin"`, `"authLevel": "function"`},
		{"functions/AccountProcessor/function.json", `"cardinality": "one",`, `"cardinality": "many",`},
	}},
	{"the registered domains are deployed, each processor on its own session queue, each with its table", checkDomainQueues, []mutation{
		{"infra/main.bicep", "  'accounts'\n", ""},
		{"infra/main.bicep", "  'orders'\n  'accounts'\n", "  'accounts'\n  'orders'\n"},
		{"infra/modules/servicebus.bicep", "  name: d.queue\n  properties: {\n    requiresSession: true", "  name: d.queue\n  properties: {\n    requiresSession: false"},
		{"functions/AccountProcessor/function.json", `"isSessionsEnabled": true`, `"isSessionsEnabled": false`},
		{"functions/AccountProcessor/function.json", "%AccountsQueueName%", "%OrdersQueueName%"},
		{emulatorConfig, `"Name": "accounts"`, `"Name": "account"`},
		{"infra/modules/servicebus.bicep", "  name: d.queue\n  properties: {\n    requiresSession: true\n    lockDuration: 'PT1M'", "  name: d.queue\n  properties: {\n    requiresSession: true\n    lockDuration: 'PT5M'"},
		{"infra/modules/resources.bicep", "  table: 'Convoy${prefixes[i]}'\n", "  table: 'Convoy${name}'\n"},
	}},
	{"each domain's queue and table carry the app's and the user's roles", checkDomainRoles, []mutation{
		{"infra/modules/roles.bicep", "resource appDomainTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in domains:", "resource appDomainTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in take(domains, 1):"},
		{"infra/modules/roles.bicep", "resource userDomainReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in domains:", "resource userDomainReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in take(domains, 1):"},
		// The name of another scope than the one assigned: the orders assignment would not keep its name.
		{"infra/modules/roles.bicep", "  name: guid(domainQueues[i].id, appPrincipalId, roles.serviceBusDataOwner)", "  name: guid(namespace.id, 'orders', appPrincipalId, roles.serviceBusDataOwner)"},
		{"infra/modules/roles.bicep", "  scope: domainTables[i]\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)\n    principalId: userPrincipalId", "  scope: domainTables[0]\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)\n    principalId: userPrincipalId"},
	}},
	{"each alert fires per domain, a line without one the default domain's", checkAlertDomains, []mutation{
		// Unanchored: a later value (error="… domain=x") would be read as the domain.
		{"infra/modules/alerts.bicep", `@"^[a-z -]* domain=(\w+)"`, `@"domain=(\w+)"`},
		{"infra/modules/alerts.bicep", `@"^[a-z -]* domain=(\w+)"`, `@"^[a-z -]* domain=(\d+)"`},
		{"infra/modules/alerts.bicep", `"{defaultDomain}")`, `"")`},
		{"infra/modules/alerts.bicep", "var byDomain = replace(domainKql, '{defaultDomain}', domainNames[0])", "var byDomain = replace(domainKql, '{defaultDomain}', domainNames[1])"},
		{"infra/modules/alerts.bicep", "values: [ '*' ]", "values: [ 'orders' ]"},
		{"infra/modules/alerts.bicep", "              name: 'domain'\n", "              name: 'Domain'\n"},
		{"infra/modules/alerts.bicep", "    query: '${replace(failingQuery, '{category}', category)}${byDomain}'\n", "    query: replace(failingQuery, '{category}', category)\n"},
		{"infra/modules/alerts.bicep", "'{domains}', domainList)", "'{domains}', '\"orders\"')"},
	}},
	{"the alert e-mail comes from ALERT_EMAIL with azd and make provision", checkAlertEmail, []mutation{
		{"infra/main.parameters.json", `"alertEmail": { "value": "${ALERT_EMAIL}" }`, `"alertEmail": { "value": "" }`},
		{"infra/main.parameters.json", `"${ALERT_EMAIL}"`, `"${ALERT_MAIL}"`},
		{"Makefile", `alertEmail="$(ALERT_EMAIL)"`, `alertEmail=""`},
		{"infra/modules/resources.bicep", "    alertEmail: alertEmail\n", "    alertEmail: ''\n"},
	}},
}

func TestDeployRules(t *testing.T) {
	d := loadDeploy(t)
	for _, r := range deployRules {
		t.Run(r.name, func(t *testing.T) {
			for _, f := range r.check(d) {
				t.Error(f)
			}
			if len(r.mutations) == 0 {
				t.Fatal("a rule without a mutation proves nothing")
			}
			for _, m := range r.mutations {
				found := r.check(d.mutate(t, m.path, m.old, m.new))
				if len(found) == 0 {
					t.Errorf("mutation of %s (%q → %q) passes the rule", m.path, clip(m.old), clip(m.new))
				} else {
					t.Logf("mutation of %s caught: %s", m.path, found[0])
				}
			}
		})
	}
}

// flexSites returns the Flex Consumption apps (those with a functionAppConfig).
func flexSites(d deployFiles) []resource {
	var out []resource
	for _, r := range ofType(d.bicep, "Microsoft.Web/sites") {
		if r.prop("properties", "functionAppConfig") != nil {
			out = append(out, r)
		}
	}
	return out
}

// Site properties and app settings Flex Consumption refuses or ignores:
// MicrosoftDocs/azure-docs, articles/azure-functions/functions-app-settings.md,
// "Flex Consumption plan deprecations" (ftpsState: "FTPS not supported").
// Compared case-insensitively, wherever they appear under properties.
var flexRefusedProperties = []string{
	"alwaysOn", "containerSize", "ftpsState", "isReserved", "isXenon", "javaVersion", "linuxFxVersion",
	"netFrameworkVersion", "powerShellVersion", "functionAppScaleLimit", "preWarmedInstanceCount",
	"use32BitWorkerProcess", "vnetBackupRestoreEnabled", "vnetContentShareEnabled", "vnetImagePullEnabled",
	"vnetRouteAllEnabled", "windowsFxVersion",
}

var flexRefusedSettings = []string{
	"ENABLE_ORYX_BUILD", "FUNCTIONS_EXTENSION_VERSION", "FUNCTIONS_WORKER_RUNTIME", "FUNCTIONS_WORKER_RUNTIME_VERSION",
	"FUNCTIONS_MAX_HTTP_CONCURRENCY", "FUNCTIONS_WORKER_PROCESS_COUNT", "FUNCTIONS_WORKER_DYNAMIC_CONCURRENCY_ENABLED",
	"SCM_DO_BUILD_DURING_DEPLOYMENT", "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING", "WEBSITE_CONTENTOVERVNET",
	"WEBSITE_CONTENTSHARE", "WEBSITE_DNS_SERVER", "WEBSITE_MAX_DYNAMIC_APPLICATION_SCALE_OUT",
	"WEBSITE_NODE_DEFAULT_VERSION", "WEBSITE_RUN_FROM_PACKAGE", "WEBSITE_SKIP_CONTENTSHARE_VALIDATION", "WEBSITE_VNET_ROUTE_ALL",
}

func refused(list []string, key string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.EqualFold(s, key) })
}

// walkProps calls fn for every key of obj and of the objects and arrays of objects below it.
func walkProps(obj *ts.Node, src []byte, path string, fn func(path, key string, value *ts.Node)) {
	if obj == nil {
		return
	}
	switch obj.Kind() {
	case "object":
		for k, v := range props(obj, src) {
			fn(path, k, v)
			walkProps(v, src, path+"."+k, fn)
		}
	case "array":
		for i := uint(0); i < obj.NamedChildCount(); i++ {
			walkProps(obj.NamedChild(i), src, path+"[]", fn)
		}
	}
}

func checkFlexRefused(d deployFiles) []string {
	var out []string
	sites := flexSites(d)
	if len(sites) == 0 {
		return []string{"no Flex Consumption site (Microsoft.Web/sites with functionAppConfig)"}
	}
	for _, s := range sites {
		walkProps(s.prop("properties"), s.file.src, "properties", func(path, key string, v *ts.Node) {
			if refused(flexRefusedProperties, key) {
				out = append(out, fmt.Sprintf("%s %s: %s.%s is refused on Flex Consumption", s.file.path, s.symbol, path, key))
			}
			if key == "name" && strings.HasSuffix(path, "appSettings[]") {
				if name, _ := literal(v, s.file.src); refused(flexRefusedSettings, name) {
					out = append(out, fmt.Sprintf("%s %s: app setting %s is refused on Flex Consumption", s.file.path, s.symbol, name))
				}
			}
		})
		if s.literal("properties", "httpsOnly") != "true" {
			out = append(out, fmt.Sprintf("%s %s: httpsOnly must be true", s.file.path, s.symbol))
		}
		if s.literal("properties", "siteConfig", "minTlsVersion") != "1.2" {
			out = append(out, fmt.Sprintf("%s %s: siteConfig.minTlsVersion must be '1.2'", s.file.path, s.symbol))
		}
	}
	app, err := deployedAppSettings(d)
	if err != nil {
		return append(out, err.Error())
	}
	for k := range app {
		if refused(flexRefusedSettings, k) {
			out = append(out, fmt.Sprintf("app setting %s is refused on Flex Consumption", k))
		}
	}
	return out
}

// nameRule is what a resource type accepts as a name, from Azure/bicep-types-az
// (generated/<provider>/<api version>/types.md) where the type carries a
// constraint, else from MicrosoftDocs/azure-docs
// articles/azure-resource-manager/management/resource-name-rules.md.
type nameRule struct {
	min, max int
	pattern  *regexp.Regexp
	extra    func(string) string // a further constraint, "" when met
	token    int                 // global names: characters of the uniqueness token they must keep
}

var nameRules = map[string]nameRule{
	// bicep-types-az resources_*/microsoft.resources/2024-03-01; resource-name-rules: can't end in period.
	"Microsoft.Resources/resourceGroups": {1, 90, regexp.MustCompile(`^[-\w._()]+$`), func(s string) string {
		if strings.HasSuffix(s, ".") {
			return "ends with a period"
		}
		return ""
	}, 0},
	// resource-name-rules: 3-128, alphanumerics, hyphens and underscores, starts with a letter or number.
	"Microsoft.ManagedIdentity/userAssignedIdentities": {3, 128, regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]*$`), nil, 0},
	// bicep-types-az operationalinsights/microsoft.operationalinsights/2023-09-01.
	"Microsoft.OperationalInsights/workspaces": {4, 63, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]+[A-Za-z0-9]$`), nil, 0},
	// resource-name-rules: 1-260, not %&\?/ or control characters, not ending with a space or period.
	"Microsoft.Insights/components": {1, 260, regexp.MustCompile(`^[^%&\\?/\x00-\x1f]*[^%&\\?/\x00-\x1f. ]$`), nil, 0},
	// resource-name-rules (Microsoft.Insights): actionGroups 1-260, not :<>+/&%\?| or control characters;
	// scheduledQueryRules 1-260, not *#&+:<>?@%{}\/| or control characters; neither ends with a space or period.
	"Microsoft.Insights/actionGroups":        {1, 260, regexp.MustCompile(`^[^:<>+/&%\\?|\x00-\x1f]*[^:<>+/&%\\?|\x00-\x1f. ]$`), nil, 0},
	"Microsoft.Insights/scheduledQueryRules": {1, 260, regexp.MustCompile(`^[^*#&+:<>?@%{}\\/|\x00-\x1f]*[^*#&+:<>?@%{}\\/|\x00-\x1f. ]$`), nil, 0},
	// A workbook's name is its id, a GUID: Azure's REST examples of Microsoft.Insights/workbooks@2023-06-01
	// (resourceName "deadb33f-5e0d-4064-8ebb-1a4ed0313eb2") and the portal name them so.
	"Microsoft.Insights/workbooks": {36, 36, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`), nil, 0},
	// resource-name-rules: global, 6-50, alphanumerics and hyphens, starts with a letter, ends with a letter
	// or number, must not end with -sb or -mgmt.
	"Microsoft.ServiceBus/namespaces": {6, 50, regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*[a-zA-Z0-9]$`), func(s string) string {
		if strings.HasSuffix(s, "-sb") || strings.HasSuffix(s, "-mgmt") {
			return "ends with -sb or -mgmt"
		}
		return ""
	}, 13},
	// bicep-types-az storage/microsoft.storage/2023-05-01: global, 3-24, ^[a-z0-9]+$.
	"Microsoft.Storage/storageAccounts": {3, 24, regexp.MustCompile(`^[a-z0-9]+$`), nil, 13},
	// bicep-types-az storage 2023-05-01: 3-63; resource-name-rules: lower case, digits, hyphens, starts with a
	// letter or number, no consecutive hyphens.
	"Microsoft.Storage/storageAccounts/blobServices/containers": {3, 63, regexp.MustCompile(`^[a-z0-9](-?[a-z0-9])*$`), nil, 0},
	// resource-name-rules: 1-260, alphanumerics, periods, hyphens, underscores and slashes, starting and
	// ending with an alphanumeric (bicep-types-az servicebus 2024-01-01: minLength 1). A domain's queue.
	"Microsoft.ServiceBus/namespaces/queues": {1, 260, regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9._/-]*[a-zA-Z0-9])?$`), nil, 0},
	// resource-name-rules (Microsoft.Storage, table): 3-63, alphanumerics, starting with a letter. A domain's table.
	"Microsoft.Storage/storageAccounts/tableServices/tables": {3, 63, regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]*$`), nil, 0},
	// resource-name-rules: 1-60, alphanumerics and hyphens.
	"Microsoft.Web/serverfarms": {1, 60, regexp.MustCompile(`^[a-zA-Z0-9-]+$`), nil, 0},
	// resource-name-rules: global, 2-60, alphanumerics and hyphens, not starting or ending with a hyphen.
	"Microsoft.Web/sites": {2, 60, regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]$`), nil, 8},
}

// azdEnvironmentNames are the shortest, longest and oddest names azd accepts:
// ^[a-zA-Z0-9-\(\)_\.]{1,64}$ (Azure/azure-dev cli/azd/pkg/environment/environment.go).
var azdEnvironmentNames = func() []string {
	names := []string{"a", "Z", "convoy-dev", "CONVOY-DEV", "dev.", "dev_", "(dev)", "-", "_", ".", "(", ")",
		"a.b_c(d)-e", "0", strings.Repeat("a", 64), strings.Repeat("a", 63) + ".", "x" + strings.Repeat("-", 63)}
	for _, c := range "-_.()" {
		names = append(names, strings.Repeat(string(c), 64))
	}
	for _, n := range []int{8, 9, 10, 22, 32, 33, 34, 45, 46, 47, 55, 56, 58, 59, 60} {
		names = append(names, strings.Repeat("b", n), strings.Repeat("b", n-1)+"_", strings.Repeat("b", n)+"__")
	}
	var valid []string
	azd := regexp.MustCompile(`^[a-zA-Z0-9-\(\)_\.]{1,64}$`)
	for _, n := range names {
		if azd.MatchString(n) {
			valid = append(valid, n)
		}
	}
	return valid
}()

// generatedNames evaluates every resource name of main.bicep and of the
// modules it calls (through their name parameters) for one environment name:
// resource type → names. A resource loop creates one resource per element of
// its array: every name it produces is computed and checked, and they must
// differ.
func generatedNames(d deployFiles, env string) (map[string][]string, []string) {
	dep := deploy(d, env)
	out := map[string][]string{}
	errs := dep.errs
	produced := map[string]bool{}
	for _, in := range dep.instances {
		if in.existing || in.typ == "Microsoft.Authorization/roleAssignments" {
			continue // references, and guid() names, are not derived from the environment
		}
		name := in.prop("name")
		if in.loop == nil {
			if _, fixed := literal(name, in.file.src); name == nil || fixed {
				continue // fixed names (the ledgers queue and table, 'default') are not derived
			}
			if id := name.Utf8Text(in.file.src); name.Kind() == "identifier" && in.e.params[id] == nil && in.e.vars[id] == nil && in.e.defaults[id] == nil {
				continue // a parameter the caller passes from a module's output, known only in Azure
			}
		} else if name == nil {
			errs = append(errs, fmt.Sprintf("%s %s: a resource loop without a name the checks can read", in.file.path, in.symbol))
			continue
		}
		if in.nameErr != nil {
			errs = append(errs, fmt.Sprintf("%s %s: name: %v", in.file.path, in.symbol, in.nameErr))
			continue
		}
		if key := in.file.path + " " + in.symbol + " " + in.name; in.loop != nil && produced[key] {
			errs = append(errs, fmt.Sprintf("%s %s: the loop produces the name %s twice", in.file.path, in.symbol, in.name))
		} else {
			produced[key] = true
		}
		if in.name != "default" {
			out[in.typ] = append(out[in.typ], in.name)
		}
	}
	return out, errs
}

func checkNames(d deployFiles) []string {
	var out []string
	// The template must accept every name azd accepts.
	if dec := decoratorsOf(d.bicep["infra/main.bicep"], "environmentName"); !slices.Contains(dec, "maxLength(64)") {
		out = append(out, fmt.Sprintf("main.bicep: environmentName must accept the 64 characters azd allows, decorators %v", dec))
	}
	seen := map[string]bool{}
	for _, env := range azdEnvironmentNames {
		names, errs := generatedNames(d, env)
		out = append(out, errs...)
		if len(errs) > 0 {
			break
		}
		for typ, list := range names {
			rule, ok := nameRules[typ]
			if !ok {
				if !seen[typ] {
					out = append(out, fmt.Sprintf("no naming rule for %s: add it to nameRules with its source", typ))
					seen[typ] = true
				}
				continue
			}
			for _, n := range list {
				var why []string
				if len(n) < rule.min || len(n) > rule.max {
					why = append(why, fmt.Sprintf("%d characters, allowed %d-%d", len(n), rule.min, rule.max))
				}
				if !rule.pattern.MatchString(n) {
					why = append(why, "does not match "+rule.pattern.String())
				}
				if rule.extra != nil {
					if s := rule.extra(n); s != "" {
						why = append(why, s)
					}
				}
				if rule.token > 0 && !strings.Contains(n, testToken[:rule.token]) {
					why = append(why, fmt.Sprintf("a globally unique name without the first %d characters of the uniqueness token", rule.token))
				}
				if len(why) > 0 {
					out = append(out, fmt.Sprintf("environment %q: %s name %q: %s", env, typ, n, strings.Join(why, "; ")))
				}
			}
		}
	}
	return out
}

// decoratorsOf returns the decorators of a parameter, as written without the @.
func decoratorsOf(f *bicepFile, param string) []string {
	if f == nil {
		return nil
	}
	root := f.tree.RootNode()
	for i := uint(1); i < root.NamedChildCount(); i++ {
		n := root.NamedChild(i)
		if n.Kind() != "parameter_declaration" || n.NamedChild(0).Utf8Text(f.src) != param {
			continue
		}
		prev := root.NamedChild(i - 1)
		if prev.Kind() != "decorators" {
			return nil
		}
		var out []string
		for j := uint(0); j < prev.NamedChildCount(); j++ {
			out = append(out, strings.Join(strings.Fields(strings.TrimPrefix(prev.NamedChild(j).Utf8Text(f.src), "@")), " "))
		}
		return out
	}
	return nil
}

// paramDeclared tells whether main declares a parameter, and whether it has a default.
func paramDeclared(f *bicepFile, param string) (declared, hasDefault bool) {
	root := f.tree.RootNode()
	for i := uint(0); i < root.NamedChildCount(); i++ {
		n := root.NamedChild(i)
		if n.Kind() == "parameter_declaration" && n.NamedChild(0).Utf8Text(f.src) == param {
			return true, strings.Contains(n.Utf8Text(f.src), "=")
		}
	}
	return false, false
}

func checkPrincipalType(d deployFiles) []string {
	var out []string
	main := d.bicep["infra/main.bicep"]
	var pj struct {
		Parameters map[string]struct {
			Value any `json:"value"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(d.text["infra/main.parameters.json"], &pj); err != nil {
		return []string{"main.parameters.json: " + err.Error()}
	}
	// azd substitutes these (Azure/azure-dev cli/azd/pkg/infra/provisioning/bicep/bicep_provider.go,
	// evalParamEnvSubst: AZURE_PRINCIPAL_ID and AZURE_PRINCIPAL_TYPE of the signed-in principal).
	for param, want := range map[string]string{
		"environmentName": "${AZURE_ENV_NAME}", "location": "${AZURE_LOCATION}",
		"principalId": "${AZURE_PRINCIPAL_ID}", "principalType": "${AZURE_PRINCIPAL_TYPE}",
	} {
		if got := pj.Parameters[param].Value; got != want {
			out = append(out, fmt.Sprintf("main.parameters.json: %s is %v, want %s", param, got, want))
		}
	}
	// Every parameter given is declared; every parameter without a default is given.
	for p := range pj.Parameters {
		if ok, _ := paramDeclared(main, p); !ok {
			out = append(out, fmt.Sprintf("main.parameters.json gives %s, which main.bicep does not declare", p))
		}
	}
	root := main.tree.RootNode()
	for i := uint(0); i < root.NamedChildCount(); i++ {
		n := root.NamedChild(i)
		if n.Kind() != "parameter_declaration" {
			continue
		}
		p := n.NamedChild(0).Utf8Text(main.src)
		if _, def := paramDeclared(main, p); !def {
			if _, ok := pj.Parameters[p]; !ok {
				out = append(out, fmt.Sprintf("main.bicep parameter %s has no default and main.parameters.json does not give it", p))
			}
		}
	}
	if dec := decoratorsOf(main, "principalType"); !slices.ContainsFunc(dec, func(s string) bool {
		return strings.HasPrefix(s, "allowed(") && strings.Contains(s, "'ServicePrincipal'") && strings.Contains(s, "'User'")
	}) {
		out = append(out, fmt.Sprintf("main.bicep principalType must allow User and ServicePrincipal: %v", dec))
	}
	// Every role assignment of the deploying principal carries its type.
	for _, r := range ofType(d.bicep, "Microsoft.Authorization/roleAssignments") {
		pid := r.prop("properties", "principalId")
		if pid == nil || pid.Utf8Text(r.file.src) == "appPrincipalId" {
			continue
		}
		if pt := r.prop("properties", "principalType"); pt == nil || pt.Utf8Text(r.file.src) != "userPrincipalType" {
			out = append(out, fmt.Sprintf("%s %s: the deploying principal's assignment must use principalType: userPrincipalType", r.file.path, r.symbol))
		}
	}
	// make provision passes the type of the principal az is signed in as.
	mk := string(d.text["Makefile"])
	if !strings.Contains(mk, "principalType=") || !strings.Contains(mk, "servicePrincipal)") {
		out = append(out, "Makefile: provision must pass principalType of the signed-in principal (User or ServicePrincipal)")
	}
	return out
}

// azdHooks reads the hooks of azure.yaml: event → run command.
func azdHooks(yaml []byte) map[string]string {
	out := map[string]string{}
	in, event := false, ""
	for _, line := range strings.Split(string(yaml), "\n") {
		switch {
		case line == "hooks:":
			in = true
		case in && len(line) > 0 && line[0] != ' ' && line[0] != '#':
			in = false
		case in && regexp.MustCompile(`^  [a-z]+:\s*$`).MatchString(line):
			event = strings.TrimSuffix(strings.TrimSpace(line), ":")
		case in && strings.HasPrefix(strings.TrimSpace(line), "run:"):
			out[event] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "run:"))
		}
	}
	return out
}

// makeRecipe returns the recipe lines of a Makefile target.
func makeRecipe(mk []byte, target string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(string(mk), "\n") {
		if strings.HasPrefix(line, target+":") {
			in = true
			continue
		}
		if in && !strings.HasPrefix(line, "\t") {
			break
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func checkHooks(d deployFiles) []string {
	var out []string
	hooks := azdHooks(d.text["azure.yaml"])
	// The publish waits for the deployment of code (postdeploy): after postprovision
	// the roles are seconds old, and `azd deploy` alone would not publish.
	if !strings.Contains(hooks["postdeploy"], "make deploy") {
		out = append(out, fmt.Sprintf("azure.yaml: postdeploy must run make deploy, hooks %v", hooks))
	}
	for ev, run := range hooks {
		if ev != "postdeploy" && strings.Contains(run, "make deploy") {
			out = append(out, fmt.Sprintf("azure.yaml: %s publishes the app; only postdeploy may", ev))
		}
	}
	if !strings.Contains(hooks["preprovision"], "ledgers-precheck") {
		out = append(out, "azure.yaml: preprovision must run make ledgers-precheck (an old sessionless ledgers queue fails the deployment)")
	}
	// make deploy retries the publish a bounded number of times, with a wait.
	rec := makeRecipe(d.text["Makefile"], "deploy")
	if !regexp.MustCompile(`for attempt in \$\$\(seq 1 \$\(DEPLOY_ATTEMPTS\)\)`).MatchString(rec) ||
		!strings.Contains(rec, "--custom && exit 0") || !strings.Contains(rec, "sleep $(DEPLOY_WAIT)") {
		out = append(out, "Makefile: deploy must retry the publish (bounded by DEPLOY_ATTEMPTS, DEPLOY_WAIT apart) until one succeeds")
	}
	if !strings.Contains(string(d.text["Makefile"]), "\nwhatif:") {
		out = append(out, "Makefile: no whatif target")
	}
	return out
}

// DNS suffixes that differ between clouds: endpoints come from the resources.
var cloudSuffix = regexp.MustCompile(`(?i)\.(servicebus|core|azurewebsites)\.(windows|chinacloudapi|usgovcloudapi)\.(net|cn)`)

func checkEndpointsAndBounds(d deployFiles) []string {
	var out []string
	main := d.bicep["infra/main.bicep"]
	dec := decoratorsOf(main, "maximumInstanceCount")
	if !slices.Contains(dec, "minValue(40)") || !slices.Contains(dec, "maxValue(1000)") {
		out = append(out, fmt.Sprintf("main.bicep maximumInstanceCount must be bounded 40-1000 for Flex: %v", dec))
	}
	if dec := decoratorsOf(main, "location"); !slices.ContainsFunc(dec, func(s string) bool {
		return regexp.MustCompile(`^metadata\(\{ ?azd: \{ ?type: 'location' ?\} ?\}\)$`).MatchString(s)
	}) {
		out = append(out, fmt.Sprintf("main.bicep location must carry azd's location metadata: %v", dec))
	}
	for path, f := range d.bicep {
		var walk func(n *ts.Node)
		walk = func(n *ts.Node) {
			if n.Kind() == "string" && cloudSuffix.MatchString(n.Utf8Text(f.src)) {
				out = append(out, fmt.Sprintf("%s line %d: hard-coded DNS suffix %s; take the endpoint from the resource", path, n.StartPosition().Row+1, n.Utf8Text(f.src)))
				return
			}
			for i := uint(0); i < n.NamedChildCount(); i++ {
				walk(n.NamedChild(i))
			}
		}
		walk(f.tree.RootNode())
	}
	settings, err := deployedAppSettings(d)
	if err != nil {
		return append(out, err.Error())
	}
	if _, ok := settings["AzureWebJobsStorage__blobServiceUri"]; !ok || settings["AzureWebJobsStorage__accountName"] != "" {
		out = append(out, "app settings: host storage by AzureWebJobsStorage__blobServiceUri (the endpoint), not __accountName (which assumes the public cloud's suffix)")
	}
	return out
}

func checkLogFormat(d deployFiles) []string {
	if app, err := deployedAppSettings(d); err == nil && app["LogFormat"] == "json" {
		return nil
	}
	return []string{"app settings: LogFormat must be 'json' (Flex may not set WEBSITE_INSTANCE_ID, by which the program would guess)"}
}

// deployedQueues are the queues the app's functions are triggered by: the
// ledgers' and each deployed domain's.
func deployedQueues(dep deployment) ([]string, error) {
	doms, err := dep.domains()
	out := []string{"ledgers"}
	for _, dom := range doms {
		out = append(out, dom.queue)
	}
	return out, err
}

func checkQueueOwner(d deployFiles) []string {
	all, out := roleAssignments(d)
	out = append(out, checkRoleIDs(d.bicep["infra/modules/roles.bicep"])...)
	queues, err := deployedQueues(deploy(d, "convoy-dev"))
	if err != nil {
		out = append(out, err.Error())
	}
	got := map[string]bool{}
	for _, a := range all {
		if a.principal == "appPrincipalId" {
			got[a.String()] = true
			if strings.HasPrefix(a.role, "serviceBus") && !slices.Contains(queues, a.scope) {
				out = append(out, "Service Bus role wider than one queue: "+a.String())
			}
		}
	}
	for _, q := range queues {
		if !got["serviceBusDataOwner on "+q] {
			out = append(out, fmt.Sprintf("the app's identity is not Service Bus Data Owner of queue %s: target-based scaling cannot read its length", q))
		}
	}
	return out
}

func checkLedgerSessions(d deployFiles) []string {
	var out []string
	dep := deploy(d, "convoy-dev")
	queues := dep.ofType("Microsoft.ServiceBus/namespaces/queues")
	// docs/contract.md: LedgerIngest (queue ledgers) and each domain's processor (orders, accounts, …) are session triggers.
	names, err := deployedQueues(dep)
	if err != nil {
		out = append(out, err.Error())
	}
	for _, q := range names {
		if r, ok := queues[q]; !ok || r.str("properties", "requiresSession") != "true" {
			out = append(out, fmt.Sprintf("queue %s must be created with requiresSession: true (docs/contract.md)", q))
		}
	}
	if !strings.Contains(azdHooks(d.text["azure.yaml"])["preprovision"], "ledgers-precheck") {
		out = append(out, "azure.yaml: preprovision must run make ledgers-precheck")
	}
	if !strings.Contains(makeRecipe(d.text["Makefile"], "provision"), "ledgers-precheck") {
		out = append(out, "Makefile: provision must run ledgers-precheck before deploying")
	}
	if !strings.Contains(makeRecipe(d.text["Makefile"], "ledgers-precheck"), "--query requiresSession") {
		out = append(out, "Makefile: ledgers-precheck must look at the existing queue's requiresSession")
	}
	return out
}

// checkRoleIDs: the roles variable names each built-in role by its id.
func checkRoleIDs(f *bicepFile) []string {
	var out []string
	root := f.tree.RootNode()
	for i := uint(0); i < root.NamedChildCount(); i++ {
		n := root.NamedChild(i)
		if n.Kind() == "variable_declaration" && n.NamedChild(0).Utf8Text(f.src) == "roles" {
			for name, v := range props(n.NamedChild(n.NamedChildCount()-1), f.src) {
				if id, _ := literal(v, f.src); roleIDs[name] != id {
					out = append(out, fmt.Sprintf("role %s has id %s, want %s", name, id, roleIDs[name]))
				}
			}
		}
	}
	return out
}

func TestSomeGeneratedNames(t *testing.T) {
	d := loadDeploy(t)
	for _, env := range []string{"convoy-dev", "Team_A.(prod)", strings.Repeat("x", 64)} {
		names, errs := generatedNames(d, env)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		t.Logf("%s: %v", env, names)
	}
}

// alertAPIVersions are the API versions of the alert resources, each checked
// to exist with the properties used in Azure/bicep-types-az
// (generated/monitor/microsoft.insights/2023-12-01/types.md:
// scheduledQueryRules with kind, criteria.allOf[].query/timeAggregation/
// operator/threshold/failingPeriods, evaluationFrequency, windowSize,
// autoMitigate, actions.actionGroups; 2023-01-01/types.md: actionGroups with
// groupShortName, enabled, emailReceivers[].name/emailAddress/useCommonAlertSchema).
var alertAPIVersions = map[string]string{
	"Microsoft.Insights/scheduledQueryRules": "2023-12-01",
	"Microsoft.Insights/actionGroups":        "2023-01-01",
}

var (
	kustoCategory   = regexp.MustCompile(`customDimensions\.Category\) == "\{category\}"`)
	kustoStartsWith = regexp.MustCompile(`startswith "([^"]+)"`)
	kustoExtract    = regexp.MustCompile(`extract\(@"(\w+)=\(\\d\+\)", 1, message\)`)
	metricsField    = regexp.MustCompile(`(?:^| )(\w+)=`)
	bicepQueryVar   = regexp.MustCompile(`(?m)^var (\w+(?:Query|Kql)) = '''`)
	bindingSetting  = regexp.MustCompile(`%([A-Za-z0-9_]+)%`)
)

// checkAlerts: the alert rules exist at API versions Azure has, read the
// category and the lines the handler writes (handler.Line*, in the Logs of
// AutoReplay's successful calls: Function.AutoReplay.User), and reach the
// action group when an e-mail is given.
func checkAlerts(d deployFiles) []string {
	var out []string
	f := d.bicep["infra/modules/alerts.bicep"]
	if f == nil {
		return []string{"infra/modules/alerts.bicep is missing"}
	}
	src := string(f.src)
	for typ, v := range alertAPIVersions {
		if !strings.Contains(src, "'"+typ+"@"+v+"'") {
			out = append(out, fmt.Sprintf("alerts.bicep: %s is not at API version %s (checked in bicep-types-az)", typ, v))
		}
	}
	if !strings.Contains(src, "var category = '"+devhostCategoryUser(handler.FnAutoReplay)+"'") {
		out = append(out, "alerts.bicep: the category is not Function.AutoReplay.User, where the host logs AutoReplay's Logs")
	}
	if n := len(kustoCategory.FindAllString(src, -1)); n != 5 {
		out = append(out, fmt.Sprintf("alerts.bicep: %d queries filter on the category, want 5", n))
	}
	// Every field a query extracts is one the metrics line has: a misspelt
	// key extracts nothing, toint gives null, and the rule never fires.
	fields := map[string]bool{}
	for _, m := range metricsField.FindAllStringSubmatch(handler.MetricsLine("orders", heal.Summary{}), -1) {
		fields[m[1]] = true
	}
	for _, m := range kustoExtract.FindAllStringSubmatch(src, -1) {
		if !fields[m[1]] {
			out = append(out, fmt.Sprintf("alerts.bicep: a query extracts %s=, which the metrics line (handler.MetricsLine) does not have", m[1]))
		}
	}
	// Besides those, one extract: the domain's (checkAlertDomains runs it on the program's lines).
	if n := strings.Count(src, "extract("); n != len(kustoExtract.FindAllString(src, -1))+len(domainExtract.FindAllString(src, -1)) || len(domainExtract.FindAllString(src, -1)) != 1 {
		out = append(out, `alerts.bicep: an extract that is neither extract(@"<field>=(\d+)", 1, message) nor the one of the domain: its field cannot be checked`)
	}
	// Every query is some rule's; domainKql is every rule's (checkAlertDomains).
	for _, m := range bicepQueryVar.FindAllStringSubmatch(src, -1) {
		if m[1] != "domainKql" && !strings.Contains(src, "replace("+m[1]+", '{category}', category)") {
			out = append(out, fmt.Sprintf("alerts.bicep: no rule runs the query %s", m[1]))
		}
	}
	known := map[string]bool{handler.LineMetrics + " ": true, handler.LineFailed: true, handler.LinePaused: true, handler.LineUnrecorded: true}
	used := map[string]bool{}
	for _, m := range kustoStartsWith.FindAllStringSubmatch(src, -1) {
		if !known[m[1]] {
			out = append(out, fmt.Sprintf("alerts.bicep: startswith %q matches no line the handler writes", m[1]))
		}
		used[m[1]] = true
	}
	for k := range known {
		if !used[k] {
			out = append(out, fmt.Sprintf("alerts.bicep: no alert on the %q lines", k))
		}
	}
	if !strings.Contains(src, "actionGroups: empty(alertEmail) ? [] : [ actionGroup.id ]") || !strings.Contains(src, "= if (!empty(alertEmail))") {
		out = append(out, "alerts.bicep: the rules do not reach the action group when alertEmail is set (or it is created without one)")
	}
	return out
}

func devhostCategoryUser(fn string) string { return "Function." + fn + ".User" }

// heartbeatQuery is the absence pattern, per domain: AutoReplay's metrics
// lines, each with its domain, the domains that wrote one (distinct), and
// the deployed domains without a match among them (rightanti against the
// list). With "number of results > 0" split by domain, the rule fires for
// exactly the domains of which no metrics line arrived in its window.
var heartbeatQuery = regexp.MustCompile(`(?s)^\s*traces\s*\|\s*where tostring\(customDimensions\.Category\) == "([^"]+)"\s*\|\s*where message startswith "` +
	regexp.QuoteMeta(handler.LineMetrics) + ` "\s*\|\s*extend domain = [^\n]+\n\s*\|\s*distinct domain\s*\|\s*join kind=rightanti \(datatable\(domain: string\) \[([^\]]*)\]\) on domain\s*$`)

// everyMinutes reads an NCRONTAB schedule that runs every n minutes ("0 */n * * * *").
var everyMinutes = regexp.MustCompile(`^0 \*/(\d+) \* \* \* \*$`)

// alertRules are the alert rules' instances, with the parameters the
// deployment passes alerts.bicep and stand-ins for those known only in
// Azure (the workbook's and the component's names).
func alertRules(d deployFiles) ([]instance, *evaluator, []string) {
	dep := deploy(d, "convoy-dev")
	f := d.bicep["infra/modules/alerts.bicep"]
	if f == nil || dep.evals[f.path] == nil {
		return nil, nil, append(dep.errs, "infra/modules/alerts.bicep is missing or not called")
	}
	params := map[string]any{"workbookDisplayName": "convoy: convoy-dev", "applicationInsightsName": "appi-convoy-dev"}
	for k, v := range dep.evals[f.path].params {
		params[k] = v
	}
	e := newEvaluator(f, params)
	var out []instance
	for _, r := range f.resources() {
		if !strings.HasPrefix(r.typ, "Microsoft.Insights/scheduledQueryRules@") {
			continue
		}
		if r.loop == nil {
			return nil, nil, []string{"alerts.bicep: the rules are not a loop of scheduledQueryRules"}
		}
		its, err := e.iterations(r.loop, nil)
		if err != nil {
			return nil, nil, []string{"alerts.bicep: " + err.Error()}
		}
		for _, it := range its {
			out = append(out, instance{resource: r, e: e, it: it, typ: "Microsoft.Insights/scheduledQueryRules"})
		}
	}
	if len(out) == 0 {
		return nil, nil, []string{"alerts.bicep: no loop of scheduledQueryRules"}
	}
	return out, e, dep.errs
}

// criterion is an alert rule's one criterion, each member evaluated.
func criterion(in instance) (map[string]any, error) {
	v, err := in.value("properties", "criteria", "allOf")
	if err == nil {
		v, err = in.e.resolve(v)
	}
	if err != nil {
		return nil, err
	}
	list, _ := asList(v)
	if len(list) != 1 {
		return nil, fmt.Errorf("%d criteria, want 1", len(list))
	}
	c, _ := list[0].(map[string]any)
	return c, nil
}

// checkHeartbeat: one of the alert rules fires when a domain's metrics lines
// are absent (the app stopped, never deployed, or every run failing), over a
// window that holds at least 3 of AutoReplay's runs, with the criteria every
// rule of the loop shares (Count of results, GreaterThan 0).
func checkHeartbeat(d deployFiles) []string {
	rules, _, out := alertRules(d)
	if rules == nil {
		return out
	}
	heartbeats := 0
	for _, in := range rules {
		c, err := criterion(in)
		if err != nil {
			return append(out, "alerts.bicep: criteria: "+err.Error())
		}
		if c["timeAggregation"] != "Count" || c["operator"] != "GreaterThan" || c["threshold"] != 0 {
			out = append(out, fmt.Sprintf("alerts.bicep: criteria %v %v %v, want Count GreaterThan 0 (number of results)", c["timeAggregation"], c["operator"], c["threshold"]))
		}
		query, _ := c["query"].(string)
		if m := heartbeatQuery.FindStringSubmatch(query); m != nil {
			if m[1] != devhostCategoryUser(handler.FnAutoReplay) {
				out = append(out, fmt.Sprintf("alerts.bicep: the heartbeat counts the lines of category %s", m[1]))
			}
			heartbeats++
		}
	}
	if heartbeats != 1 {
		out = append(out, fmt.Sprintf("alerts.bicep: %d rules fire when a domain's metrics lines are absent (… | distinct domain | join kind=rightanti (datatable(domain: string) [<the domains>]) on domain), want 1", heartbeats))
	}
	// The window holds at least 3 runs of AutoReplay as deployed.
	window := rules[0].str("properties", "windowSize")
	wm := regexp.MustCompile(`^PT(\d+)M$`).FindStringSubmatch(window)
	app, err := deployedAppSettings(d)
	if err != nil {
		return append(out, err.Error())
	}
	schedule := app["AutoReplaySchedule"]
	sm := everyMinutes.FindStringSubmatch(schedule)
	switch {
	case wm == nil:
		out = append(out, fmt.Sprintf("alerts.bicep: windowSize %q is not PT<n>M", window))
	case sm == nil:
		out = append(out, fmt.Sprintf("functionapp.bicep: AutoReplaySchedule %q is not \"0 */<n> * * * *\": the heartbeat's window cannot be checked against it", schedule))
	default:
		w, _ := strconv.Atoi(wm[1])
		n, _ := strconv.Atoi(sm[1])
		if w < 3*n {
			out = append(out, fmt.Sprintf("alerts.bicep: a %d-minute window holds fewer than 3 runs of AutoReplay (every %d minutes): the heartbeat would fire on a healthy app", w, n))
		}
	}
	return out
}

// checkAlertEmail: the address the alerts are sent to is the environment's
// ALERT_EMAIL both ways: azd substitutes ${ALERT_EMAIL} in
// main.parameters.json from the azd environment (`azd env set ALERT_EMAIL …`;
// unset, it is empty: no action group), make provision passes
// alertEmail="$(ALERT_EMAIL)"; main.bicep passes it on to the alerts module.
func checkAlertEmail(d deployFiles) []string {
	var out []string
	var pj struct {
		Parameters map[string]struct {
			Value any `json:"value"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(d.text["infra/main.parameters.json"], &pj); err != nil {
		return []string{"main.parameters.json: " + err.Error()}
	}
	if got := pj.Parameters["alertEmail"].Value; got != "${ALERT_EMAIL}" {
		out = append(out, fmt.Sprintf("main.parameters.json: alertEmail is %v, want ${ALERT_EMAIL} (azd's environment)", got))
	}
	mk := string(d.text["Makefile"])
	if !regexp.MustCompile(`(?m)^AZ_PARAMS = .*(\n .*)*alertEmail="\$\(ALERT_EMAIL\)"`).MatchString(mk) || !strings.Contains(makeRecipe(d.text["Makefile"], "provision"), "$(AZ_PARAMS)") {
		out = append(out, `Makefile: provision must pass alertEmail="$(ALERT_EMAIL)" (in AZ_PARAMS)`)
	}
	// main.bicep → resources.bicep → alerts.bicep, parameter to parameter.
	for _, hop := range []struct{ file, module string }{
		{"infra/main.bicep", "modules/resources.bicep"}, {"infra/modules/resources.bicep", "alerts.bicep"},
	} {
		if got := moduleParam(d.bicep[hop.file], hop.module, "alertEmail"); got != "alertEmail" {
			out = append(out, fmt.Sprintf("%s: module %s gets alertEmail: %q, want the parameter alertEmail", hop.file, hop.module, got))
		}
	}
	return out
}

// moduleParam is the source text of one parameter a file passes to a module.
func moduleParam(f *bicepFile, module, param string) string {
	if f == nil {
		return ""
	}
	for _, m := range modules(f) {
		if m.path == module {
			if v := props(props(m.body, f.src)["params"], f.src)[param]; v != nil {
				return v.Utf8Text(f.src)
			}
		}
	}
	return ""
}

// moduleUse is a module declaration of a file: the module's path, as
// written, and its body.
type moduleUse struct {
	path string
	body *ts.Node
}

// modules are the module declarations of f, in order.
func modules(f *bicepFile) []moduleUse {
	var out []moduleUse
	root := f.tree.RootNode()
	for i := uint(0); i < root.NamedChildCount(); i++ {
		m := root.NamedChild(i)
		if m.Kind() != "module_declaration" {
			continue
		}
		var use moduleUse
		for j := uint(0); j < m.NamedChildCount(); j++ {
			switch c := m.NamedChild(j); c.Kind() {
			case "string":
				use.path, _ = literal(c, f.src)
			case "object":
				use.body = c
			}
		}
		out = append(out, use)
	}
	return out
}
