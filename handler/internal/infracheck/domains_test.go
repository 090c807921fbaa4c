package infracheck

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/settings"
)

// The rules of this file hold the deployment to the registered domains
// (handler/domains.All): the templates deploy each, in the same order, with
// its processor function, queue, table, settings, roles and alerts, all
// named as the program names them. They are rules of TestDeployRules, each
// with the mutations it must catch.

// title is a name with its first letter upper-cased (issue 44's naming
// table: Title(Name), Title(Noun)).
func title(s string) string {
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// domainFunctionNames are a domain's five functions by role, as issue 44's
// table names them (the order domain's skip function kept its name, SkipGap).
func domainFunctionNames(dom keyed.Domain) map[string]string {
	skip := "Skip" + title(dom.Noun()) + "Gap"
	if dom.Name() == "orders" {
		skip = "SkipGap"
	}
	return map[string]string{
		"processor": title(dom.Noun()) + "Processor",
		"status":    title(dom.Noun()) + "Status",
		"blocked":   "Blocked" + title(dom.Name()),
		"replay":    "Replay" + title(dom.Noun()),
		"skip":      skip,
	}
}

// appFunctions are the functions every domain shares (?domain= selects).
var appFunctions = []string{"AutoReplay", "Dashboard", "HealthSummary", "LedgerIngest", "LedgerUpload", "ReplayDeadLetters"}

// checkDomainFunctions: each registered domain has its five functions, each
// with the bindings of the order domain's function of the same role, its
// queue setting and routes renamed as the table has them (processor on
// %<Title(Name)>QueueName%; <Name>/{<noun>Id}, <Name>, …/replay, …/skip),
// and no other function folder exists.
func checkDomainFunctions(d deployFiles) []string {
	fns, out := d.functions()
	var orders keyed.Domain
	for _, dom := range domains.All {
		if dom.Name() == "orders" {
			orders = dom
		}
	}
	if orders == nil {
		return append(out, "no orders domain is registered: the functions of the other domains have no model")
	}
	model := domainFunctionNames(orders)
	want := map[string]bool{}
	for _, f := range appFunctions {
		want[f] = true
	}
	for _, dom := range domains.All {
		id := "{" + dom.Noun() + "Id}"
		routes := map[string]string{
			"status":  dom.Name() + "/" + id,
			"blocked": dom.Name(),
			"replay":  dom.Name() + "/" + id + "/replay",
			"skip":    dom.Name() + "/" + id + "/skip",
		}
		for role, name := range domainFunctionNames(dom) {
			want[name] = true
			m, ok := fns[model[role]]
			got, ok2 := fns[name]
			if !ok || !ok2 {
				out = append(out, fmt.Sprintf("domain %s: no function %s (or no model %s)", dom.Name(), name, model[role]))
				continue
			}
			expect := cloneBindings(m.bindings)
			trigger := expect[0]
			if role == "processor" {
				trigger["queueName"] = "%" + settings.QueueSetting(dom) + "%"
			} else {
				trigger["route"] = routes[role]
			}
			if !reflect.DeepEqual(got.bindings, expect) {
				out = append(out, fmt.Sprintf("domain %s: %s has the bindings %v, want %v (%s's, renamed)", dom.Name(), name, got.bindings, expect, model[role]))
			}
		}
	}
	for name := range fns {
		if !want[name] {
			out = append(out, fmt.Sprintf("functions/%s belongs to no registered domain and is none of the app's functions %v", name, appFunctions))
		}
	}
	return out
}

func cloneBindings(bs []map[string]any) []map[string]any {
	out := make([]map[string]any, len(bs))
	for i, b := range bs {
		out[i] = map[string]any{}
		for k, v := range b {
			out[i][k] = v
		}
	}
	return out
}

// checkBindingSettings: every %Setting% of a function.json is an app
// setting Bicep sets (the host refuses a function whose binding expression
// does not resolve).
func checkBindingSettings(d deployFiles) []string {
	app, err := deployedAppSettings(d)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for p, data := range d.text {
		if !strings.HasPrefix(p, "functions/") {
			continue
		}
		for _, m := range bindingSetting.FindAllStringSubmatch(string(data), -1) {
			if _, ok := app[m[1]]; !ok {
				out = append(out, fmt.Sprintf("%s needs the app setting %s, which Bicep does not set", p, m[1]))
			}
		}
	}
	sort.Strings(out)
	return out
}

// emulatorQueues reads the deployment's local emulator config.
func emulatorQueues(d deployFiles) (map[string]devbus.QueueProperties, error) {
	dir, err := os.MkdirTemp("", "infracheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, d.text[emulatorConfig], 0o644); err != nil {
		return nil, err
	}
	return devhost.LoadQueueConfig(path)
}

// serviceBusTrigger is a function's Service Bus trigger binding, or nil.
func serviceBusTrigger(f functionJSON) map[string]any {
	for _, b := range f.bindings {
		if b["type"] == "serviceBusTrigger" {
			return b
		}
	}
	return nil
}

// checkDomainQueues: the templates deploy the registered domains
// (handler/domains.All), in their order (the first is the default); each
// domain's processor is triggered, with sessions, by the queue its setting
// names, which Bicep and the local emulator both create with sessions and
// the same lock and delivery budget; its table setting names the table
// Bicep creates; all under the program's names and defaults.
func checkDomainQueues(d deployFiles) []string {
	dep := deploy(d, "convoy-dev")
	out := dep.errs
	doms, err := dep.domains()
	if err != nil {
		return append(out, err.Error())
	}
	var deployed, registered []string
	for _, dom := range doms {
		deployed = append(deployed, dom.name)
	}
	for _, dom := range domains.All {
		registered = append(registered, dom.Name())
	}
	if !slices.Equal(deployed, registered) {
		out = append(out, fmt.Sprintf("main.bicep deploys the domains %v, handler/domains.All registers %v (in this order: the first is the default)", deployed, registered))
	}
	app, err := dep.appSettings()
	if err != nil {
		return append(out, err.Error())
	}
	fns, errs := d.functions()
	out = append(out, errs...)
	local, err := emulatorQueues(d)
	if err != nil {
		return append(out, err.Error())
	}
	queues := dep.ofType("Microsoft.ServiceBus/namespaces/queues")
	tables := dep.ofType("Microsoft.Storage/storageAccounts/tableServices/tables")
	for _, dom := range domains.All {
		setting, queue := settings.QueueSetting(dom), settings.DefaultQueue(dom)
		fn := domainFunctionNames(dom)["processor"]
		switch t := serviceBusTrigger(fns[fn]); {
		case t == nil:
			out = append(out, fmt.Sprintf("domain %s: no function %s triggered by Service Bus", dom.Name(), fn))
		case t["queueName"] != "%"+setting+"%" || t["isSessionsEnabled"] != true:
			out = append(out, fmt.Sprintf("domain %s: %s reads queue %v with isSessionsEnabled %v, want %%%s%% with sessions", dom.Name(), fn, t["queueName"], t["isSessionsEnabled"], setting))
		}
		if app[setting] != queue {
			out = append(out, fmt.Sprintf("domain %s: app setting %s is %q, the program's default %q", dom.Name(), setting, app[setting], queue))
		}
		q, ok := queues[queue]
		if !ok || q.str("properties", "requiresSession") != "true" {
			out = append(out, fmt.Sprintf("domain %s: Bicep creates queue %s: %v, with requiresSession %q, want true", dom.Name(), queue, ok, q.str("properties", "requiresSession")))
		}
		l, ok := local[queue]
		switch {
		case !ok || !l.RequiresSession:
			out = append(out, fmt.Sprintf("domain %s: %s has queue %s: %v, with sessions %v", dom.Name(), emulatorConfig, queue, ok, l.RequiresSession))
		case q.str("properties", "lockDuration") != isoMinutes(l.LockDuration) || q.str("properties", "maxDeliveryCount") != fmt.Sprint(l.MaxDeliveryCount) ||
			q.str("properties", "deadLetteringOnMessageExpiration") != fmt.Sprint(l.DeadLetteringOnMessageExpiration):
			out = append(out, fmt.Sprintf("domain %s: queue %s: lock %s, deliveries %s, expired dead-lettered %s in Bicep; %s, %d, %v locally", dom.Name(), queue,
				q.str("properties", "lockDuration"), q.str("properties", "maxDeliveryCount"), q.str("properties", "deadLetteringOnMessageExpiration"),
				l.LockDuration, l.MaxDeliveryCount, l.DeadLetteringOnMessageExpiration))
		}
		tableSetting, table := settings.TableSetting(dom), settings.DefaultTable(dom)
		if _, ok := tables[table]; !ok || app[tableSetting] != table {
			out = append(out, fmt.Sprintf("domain %s: app setting %s is %q, Bicep creates table %s: %v; the program's default is %s", dom.Name(), tableSetting, app[tableSetting], table, ok, table))
		}
	}
	return out
}

// checkDomainRoles: on each deployed domain's queue and table, the app's
// identity has the roles it has on the orders queue and table (Data Owner of
// the queue: its trigger, sends, dead letters, target-based scaling; Table
// Data Contributor), and so has the deploying user (Sender and Receiver:
// replay; Table Data Contributor: --direct); each assignment named after
// the scope it assigns (roleAssignments).
func checkDomainRoles(d deployFiles) []string {
	all, out := roleAssignments(d)
	doms, err := deploy(d, "convoy-dev").domains()
	if err != nil {
		return append(out, err.Error())
	}
	got := map[string]bool{}
	for _, a := range all {
		got[a.principal+" "+a.String()] = true
	}
	for _, dom := range doms {
		for _, want := range []string{
			"appPrincipalId serviceBusDataOwner on " + dom.queue,
			"appPrincipalId storageTableDataContributor on " + dom.table,
			"userPrincipalId serviceBusDataSender on " + dom.queue,
			"userPrincipalId serviceBusDataReceiver on " + dom.queue,
			"userPrincipalId storageTableDataContributor on " + dom.table,
		} {
			if !got[want] {
				out = append(out, fmt.Sprintf("domain %s: roles.bicep does not assign %s", dom.name, want))
			}
		}
	}
	return out
}

var (
	// domainExtract is the extract of a line's domain field.
	domainExtract = regexp.MustCompile(`extract\(@"([^"]*domain=[^"]*)", 1, message\)`)
	// domainColumn is the column of a line's domain, the default domain's when the line has none.
	domainColumn = regexp.MustCompile(`\| extend domain = coalesce\(extract\(@"([^"]*)", 1, message\), "([^"]*)"\)`)
	// heartbeatList is the heartbeat's list of the deployed domains.
	heartbeatList = regexp.MustCompile(`datatable\(domain: string\) \[([^\]]*)\]`)
)

// autoReplayPrefixes are the prefixes of AutoReplay's lines, each followed
// by a domain=<Name> field (issue 44: right after the prefix).
var autoReplayPrefixes = []string{handler.LineMetrics, handler.LineReplayed, handler.LineFailed, handler.LinePaused, handler.LineUnrecorded}

// checkAlertDomains: every alert rule fires per domain: its query gives each
// line a domain column (the line's domain field, right after its prefix; the
// default domain's, the first deployed, for a line without one) and keeps it
// to the end, the rule splits by it (dimension domain, every value), and the
// heartbeat lists every deployed domain. The extract of the domain is run,
// with Go's regexp (RE2, as Kusto's), on the AutoReplay lines the handler
// writes: with each domain's field it reads that domain; without one,
// nothing (the default), even when a later value holds " domain=".
func checkAlertDomains(d deployFiles) []string {
	rules, _, out := alertRules(d)
	if rules == nil {
		return out
	}
	doms, err := deploy(d, "convoy-dev").domains()
	if err != nil {
		return append(out, err.Error())
	}
	var names []string
	for _, dom := range doms {
		names = append(names, `"`+dom.name+`"`)
	}
	lines, err := programLines()
	if err != nil {
		return append(out, "calling the handler: "+err.Error())
	}
	probed := 0
	for _, in := range rules {
		rule := in.str("name")
		c, err := criterion(in)
		if err != nil {
			return append(out, "alerts.bicep: criteria: "+err.Error())
		}
		wantDim := []any{map[string]any{"name": "domain", "operator": "Include", "values": []any{"*"}}}
		if !reflect.DeepEqual(c["dimensions"], wantDim) {
			out = append(out, fmt.Sprintf("alerts.bicep: rule %s splits by %v, want %v", rule, c["dimensions"], wantDim))
		}
		query, _ := c["query"].(string)
		m := domainColumn.FindAllStringSubmatch(query, -1)
		if len(m) != 1 {
			out = append(out, fmt.Sprintf("alerts.bicep: rule %s: %d domain columns (| extend domain = coalesce(extract(@\"…\", 1, message), \"<default>\")), want 1:\n%s", rule, len(m), query))
			continue
		}
		if m[0][2] != doms[0].name {
			out = append(out, fmt.Sprintf("alerts.bicep: rule %s: a line without a domain is %q's, want the default domain's, %q", rule, m[0][2], doms[0].name))
		}
		if list := heartbeatList.FindStringSubmatch(query); list != nil {
			if list[1] != strings.Join(names, ", ") {
				out = append(out, fmt.Sprintf("alerts.bicep: rule %s lists the domains [%s], the deployment has [%s]", rule, list[1], strings.Join(names, ", ")))
			}
		} else if !strings.HasSuffix(strings.TrimSpace(query), m[0][0]) {
			out = append(out, fmt.Sprintf("alerts.bicep: rule %s: the domain column is not the query's last step (a later one may drop it):\n%s", rule, query))
		}
		re, err := regexp.Compile(m[0][1])
		if err != nil {
			out = append(out, fmt.Sprintf("alerts.bicep: rule %s: the domain's regex: %v", rule, err))
			continue
		}
		extract := func(line string) string {
			if g := re.FindStringSubmatch(line); len(g) > 1 {
				return g[1]
			}
			return ""
		}
		for _, l := range lines {
			if l.category != devhostCategoryUser(handler.FnAutoReplay) {
				continue
			}
			prefix, rest := splitPrefix(l.message)
			if prefix == "" {
				continue
			}
			own, rest := cutDomain(rest)
			if got := extract(l.message); got != own {
				out = append(out, fmt.Sprintf("alerts.bicep: rule %s reads the domain %q of the program's line %q, want %q", rule, got, l.message, own))
			}
			probed++
			plain := prefix + rest
			for _, probe := range []struct{ line, want string }{
				{plain, ""}, // a handler older than domains: the default domain's
				{plain + ` error="and domain=evil"`, ""},
				{prefix + " domain=" + doms[len(doms)-1].name + rest, doms[len(doms)-1].name},
				{prefix + " domain=" + doms[0].name + rest, doms[0].name},
			} {
				if got := extract(probe.line); got != probe.want {
					out = append(out, fmt.Sprintf("alerts.bicep: rule %s reads the domain %q of %q, want %q", rule, got, probe.line, probe.want))
				}
			}
		}
	}
	if probed == 0 {
		out = append(out, "the handler wrote no AutoReplay line to read a domain from")
	}
	return out
}

// splitPrefix splits an AutoReplay line into its prefix and the rest (" key=value …").
func splitPrefix(line string) (prefix, rest string) {
	for _, p := range autoReplayPrefixes {
		if strings.HasPrefix(line, p+" ") {
			return p, line[len(p):]
		}
	}
	return "", line
}

// cutDomain takes the domain field off the start of a line's fields.
func cutDomain(rest string) (domain, others string) {
	after, ok := strings.CutPrefix(rest, " domain=")
	if !ok {
		return "", rest
	}
	domain, others, _ = strings.Cut(after, " ")
	if others != "" {
		others = " " + others
	}
	return domain, others
}
