package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

type runOptions struct {
	app, queues, settingsFile, logFile string
	port, sbPort, instances            int
	scale                              float64
}

// stateFile, in the app directory, tells `break` (and any tool) where a
// running emulation is; it is removed when run stops.
const stateFile = "devhost.json"

// state is what stateFile holds.
type state struct {
	URL                  string `json:"url"`
	ServiceBusConnection string `json:"serviceBusConnection"`
	StateStorage         string `json:"stateStorage"`
	PID                  int    `json:"pid"`
}

// emulated are the settings the emulation sets itself, whatever the file or
// the environment say: its Service Bus (set by devhost.Start) and its Azurite.
var emulated = []string{"ServiceBusConnection", "StateStorage", "AzureWebJobsStorage"}

// defaults fill in settings that neither the file nor the environment set:
// the queue settings of every registered domain too (devhost.QueueSettings).
var defaults = devhost.WithQueueSettings(map[string]string{
	"AutoReplaySchedule": "0 */1 * * * *", // AutoReplay: every minute, as deployed
})

// appSettings are the app settings as Core Tools gives them to the host: the
// Values of local.settings.json, each replaced by the environment variable
// of the same name when that is set and not empty (Core Tools then writes
// "Skipping '<name>' from local settings as it's already defined in current
// environment variables"), and every other environment variable (the host
// reads its environment as app settings). fromEnv lists the file's values
// the environment replaced.
func appSettings(file map[string]string, environ []string) (settings map[string]string, fromEnv []string) {
	settings = map[string]string{}
	for k, v := range defaults {
		settings[k] = v
	}
	for k, v := range file {
		settings[k] = v
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			continue
		}
		if _, inFile := file[k]; inFile && file[k] != v {
			fromEnv = append(fromEnv, k)
		}
		settings[k] = v
	}
	slices.Sort(fromEnv)
	return settings, fromEnv
}

// readValues reads the Values of a local.settings.json; a missing file is
// none.
func readValues(path string) (map[string]string, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var doc struct {
		IsEncrypted bool
		Values      map[string]any
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	if doc.IsEncrypted {
		return nil, false, fmt.Errorf("%s: IsEncrypted is true: the emulation reads plain values only (func settings decrypt)", path)
	}
	values := map[string]string{}
	for k, v := range doc.Values {
		s, ok := v.(string)
		if !ok {
			return nil, false, fmt.Errorf("%s: Values.%s is %s, want a string (app settings are strings)", path, k, jsonKind(v))
		}
		values[k] = s
	}
	return values, true, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

func run(ctx context.Context, o runOptions) error {
	if err := portFree(o.port); err != nil {
		return err
	}
	file, found, err := readValues(o.settingsFile)
	if err != nil {
		return err
	}
	settings, fromEnv := appSettings(file, os.Environ())
	q, err := devhost.LoadQueueConfig(o.queues)
	if err != nil {
		return err
	}
	az, err := azurite.Start(azurite.Options{Port: 10002}) // Azurite's usual port, if free
	if err != nil {
		if az, err = azurite.Start(azurite.Options{}); err != nil {
			return err
		}
	}
	defer az.Stop()
	given := map[string]string{}
	for _, k := range emulated {
		if v, ok := settings[k]; ok {
			given[k] = v
		}
	}
	settings["StateStorage"], settings["AzureWebJobsStorage"] = az.ConnectionString(), az.ConnectionString()
	if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", o.sbPort)); err != nil {
		o.sbPort = 0 // the emulator's usual port is taken: any free one
	} else {
		ln.Close()
	}
	h, err := devhost.Start(devhost.Options{AppDir: o.app, Queues: q, Port: o.port, ServiceBusPort: o.sbPort, Log: os.Stderr,
		MaxInstances: o.instances, TimeScale: o.scale, Settings: settings})
	if err != nil {
		return err
	}
	defer h.Stop()
	var replaced []string
	for _, k := range emulated {
		v, ok := given[k]
		sameAzurite := strings.EqualFold(strings.ReplaceAll(v, " ", ""), "UseDevelopmentStorage=true") && az.Port == 10002
		if ok && v != az.ConnectionString() && v != h.ServiceBusConnectionString() && !sameAzurite {
			replaced = append(replaced, k)
		}
	}
	st := state{URL: h.URL(), ServiceBusConnection: h.ServiceBusConnectionString(), StateStorage: az.ConnectionString(), PID: os.Getpid()}
	data, _ := json.MarshalIndent(st, "", "  ")
	statePath := filepath.Join(o.app, stateFile)
	if err := os.WriteFile(statePath, data, 0o644); err != nil {
		return err
	}
	defer os.Remove(statePath)

	source := "no " + o.settingsFile + " (the defaults)"
	if found {
		source = fmt.Sprintf("%s's Values (%d)", o.settingsFile, len(file))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, then the environment, which wins (as Core Tools)", source)
	if len(fromEnv) > 0 {
		fmt.Fprintf(&b, ": from the environment %s", strings.Join(fromEnv, ", "))
	}
	if len(replaced) > 0 {
		fmt.Fprintf(&b, "\n               %s: replaced by the emulation's (its Service Bus, its Azurite)", strings.Join(replaced, ", "))
	}
	autoReplay := "on"
	if strings.EqualFold(settings["AutoReplayEnabled"], "false") {
		autoReplay = "off (AutoReplayEnabled=false)"
	}
	fmt.Print(banner(h.URL(), o.app, h.Bus().Addr(), h.ServiceBusConnectionString(), az.ConnectionString(), az.Port, o.port, b.String(),
		autoReplay, settings["AutoReplaySchedule"]))
	<-ctx.Done()
	fmt.Println("convoy-devhost: stopping the emulation, the handler and Azurite")
	return nil
}

// banner is what run prints once everything is up.
func banner(url, app, busAddr, busConn, storage string, azPort, port int, settings, autoReplay, schedule string) string {
	portArg := ""
	if port != 7071 {
		portArg = fmt.Sprintf(" PORT=%d", port)
	}
	return fmt.Sprintf(`convoy-devhost: the function app in %[2]s runs under the local emulation of the Functions host and
Service Bus, with Azurite (development only; Ctrl-C or SIGTERM stops all three).
  dashboard:   %[1]s/api/dashboard
  summary:     %[1]s/api/summary
  blocked:     %[1]s/api/orders?blocked=true
  an order:    %[1]s/api/orders/{orderId}        upload a ledger: POST %[1]s/api/ledgers
  keys:        NOT CHECKED, as with Core Tools locally: every function answers without a key (authLevel
               function and admin alike; the dashboard's admin key field takes any text). In Azure they
               need x-functions-key (the admin key for replay and skip).
  copy:        into the terminal you run the convoy commands in (they carry the ports this run took):
               export ServiceBusConnection='%[4]s'
               export StateStorage='%[5]s'
  publish:     go run . publish testdata/ledgers/01-morning.json   (Service Bus, AMQP 1.0, plain TCP on %[3]s)
  state:       Azurite (in memory) on 127.0.0.1:%[6]d: StateStorage is for publish --direct, replay and skip
  settings:    %[7]s
  AutoReplay:  %[8]s, schedule %[9]s
  practise:    make break%[10]s   creates a blocked order of each kind to replay and skip
`, url, app, busAddr, busConn, storage, azPort, settings, autoReplay, schedule, portArg)
}
