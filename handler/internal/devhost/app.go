// Package devhost is a development and test tool, never used in Azure: a
// local emulation of the Azure Functions host driving a custom handler,
// faithful to docs/host-contract.md. It reads the staged app (host.json,
// <Name>/function.json), starts the real handler binary the way the host
// does, invokes it with the host's encoding, serves HTTP functions at
// /api/<route> like `func start`, and triggers functions from the Service
// Bus queues of package devbus, which it serves over AMQP 1.0 to the handler
// and any Service Bus client.
package devhost

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// Binding is one binding of a function.json.
type Binding struct {
	Type              string   `json:"type"`
	Direction         string   `json:"direction"`
	Name              string   `json:"name"`
	QueueName         string   `json:"queueName"`
	Connection        string   `json:"connection"`
	IsSessionsEnabled bool     `json:"isSessionsEnabled"`
	Cardinality       string   `json:"cardinality"`
	DataType          string   `json:"dataType"`
	Route             string   `json:"route"`
	Methods           []string `json:"methods"`
	AuthLevel         string   `json:"authLevel"`
}

// Function is one function of the app.
type Function struct {
	Name    string
	Trigger Binding
}

// batch reports whether a Service Bus trigger takes batches.
func (f Function) batch() bool { return strings.EqualFold(f.Trigger.Cardinality, "many") }

// HostConfig is the part of host.json the emulation honours.
type HostConfig struct {
	FunctionTimeout string `json:"functionTimeout"`
	Logging         struct {
		LogLevel map[string]string `json:"logLevel"`
	} `json:"logging"`
	CustomHandler struct {
		Description struct {
			DefaultExecutablePath string   `json:"defaultExecutablePath"`
			Arguments             []string `json:"arguments"`
		} `json:"description"`
		EnableForwardingHttpRequest bool `json:"enableForwardingHttpRequest"`
		EnableProxyingHttpRequest   bool `json:"enableProxyingHttpRequest"`
	} `json:"customHandler"`
	Extensions struct {
		HTTP struct {
			RoutePrefix *string `json:"routePrefix"`
		} `json:"http"`
		ServiceBus struct {
			PrefetchCount                int    `json:"prefetchCount"`
			AutoCompleteMessages         *bool  `json:"autoCompleteMessages"`
			MaxConcurrentCalls           int    `json:"maxConcurrentCalls"`
			MaxConcurrentSessions        int    `json:"maxConcurrentSessions"`
			MaxConcurrentCallsPerSession int    `json:"maxConcurrentCallsPerSession"`
			SessionIdleTimeout           string `json:"sessionIdleTimeout"`
			MaxAutoLockRenewalDuration   string `json:"maxAutoLockRenewalDuration"`
			MaxMessageBatchSize          int    `json:"maxMessageBatchSize"`
		} `json:"serviceBus"`
	} `json:"extensions"`
}

// App is a staged function app.
type App struct {
	Dir       string
	Host      HostConfig
	Functions []Function

	FunctionTimeout    time.Duration
	SessionIdleTimeout time.Duration
	// MaxAutoLockRenewal is how long after accepting a session (or receiving
	// a message) the SDK keeps renewing its lock; < 0 is without end.
	MaxAutoLockRenewal time.Duration
	Logs               LogFilter
}

// defaultFunctionTimeout is functionTimeout when host.json sets none, on
// Flex Consumption (ScriptJobHostOptionsSetup.ConfigureFunctionTimeout:
// DefaultFunctionTimeout for every SKU but the classic Consumption plan's
// 5 minutes).
const defaultFunctionTimeout = 30 * time.Minute

// HTTP forwarding modes of customHandler in host.json.
const (
	forwardNone   = "none"    // HTTP functions are invoked with an envelope (Data.req)
	forwardLegacy = "forward" // enableForwardingHttpRequest: the host rebuilds the request
	forwardProxy  = "proxy"   // enableProxyingHttpRequest (host PR #11035): YARP passes the request as is
)

// forwarding says how HTTP functions receive requests; proxying wins when
// both are set, as DefaultHttpWorkerService checks it first.
func (a *App) forwarding() string {
	switch {
	case a.Host.CustomHandler.EnableProxyingHttpRequest:
		return forwardProxy
	case a.Host.CustomHandler.EnableForwardingHttpRequest:
		return forwardLegacy
	}
	return forwardNone
}

// routePrefix is the HTTP route prefix ("api" unless host.json says otherwise).
func (a *App) routePrefix() string {
	if p := a.Host.Extensions.HTTP.RoutePrefix; p != nil {
		return strings.Trim(*p, "/")
	}
	return "api"
}

var bindingExpr = regexp.MustCompile(`%([^%]+)%`)

// LoadApp reads the app in dir, resolving %Setting% binding expressions from
// settings, and refuses what the real host would refuse.
func LoadApp(dir string, settings map[string]string) (*App, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	a := &App{Dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, "host.json"))
	if err != nil {
		return nil, fmt.Errorf("not a staged function app (run make stage): %w", err)
	}
	if err := json.Unmarshal(data, &a.Host); err != nil {
		return nil, fmt.Errorf("host.json: %w", err)
	}
	if a.Host.CustomHandler.Description.DefaultExecutablePath == "" {
		return nil, fmt.Errorf("host.json: customHandler.description.defaultExecutablePath is not set")
	}
	sb := a.Host.Extensions.ServiceBus
	if sb.AutoCompleteMessages != nil && !*sb.AutoCompleteMessages {
		return nil, fmt.Errorf("host.json: autoCompleteMessages false: a custom handler cannot settle messages")
	}
	if a.FunctionTimeout, err = timeSpan(a.Host.FunctionTimeout, defaultFunctionTimeout); err != nil {
		return nil, fmt.Errorf("host.json functionTimeout: %w", err)
	}
	if a.SessionIdleTimeout, err = timeSpan(sb.SessionIdleTimeout, time.Minute); err != nil {
		return nil, fmt.Errorf("host.json sessionIdleTimeout: %w", err)
	}
	if a.MaxAutoLockRenewal, err = timeSpan(sb.MaxAutoLockRenewalDuration, 5*time.Minute); err != nil {
		return nil, fmt.Errorf("host.json maxAutoLockRenewalDuration: %w", err)
	}
	if a.Logs, err = NewLogFilter(a.Host.Logging.LogLevel); err != nil {
		return nil, fmt.Errorf("host.json logging.logLevel: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "function.json"))
	if len(files) == 0 {
		return nil, fmt.Errorf("no <Name>/function.json under %s", dir)
	}
	for _, file := range files {
		var fj struct {
			Bindings []Binding `json:"bindings"`
		}
		data, err := os.ReadFile(file)
		if err == nil {
			err = json.Unmarshal(data, &fj)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		f := Function{Name: filepath.Base(filepath.Dir(file))}
		for _, b := range fj.Bindings {
			if strings.HasSuffix(b.Type, "Trigger") {
				f.Trigger = b
			}
		}
		if f.Trigger.Type == "" {
			return nil, fmt.Errorf("%s: no trigger binding", file)
		}
		if f.Trigger.QueueName, err = resolve(f.Trigger.QueueName, settings); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if f.batch() && f.Trigger.DataType != "string" {
			return nil, fmt.Errorf(`%s: "cardinality": "many" needs "dataType": "string"`, file)
		}
		a.Functions = append(a.Functions, f)
	}
	return a, nil
}

func resolve(s string, settings map[string]string) (string, error) {
	var missing []string
	out := bindingExpr.ReplaceAllStringFunc(s, func(m string) string {
		v, ok := settings[strings.Trim(m, "%")]
		if !ok {
			missing = append(missing, m)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("binding expression %s does not resolve to an app setting", strings.Join(missing, ", "))
	}
	return out, nil
}

// timeSpan parses a .NET TimeSpan: [-][d.]hh:mm:ss[.fffffff]. Any negative
// value is Timeout.InfiniteTimeSpan's meaning (-00:00:00.0010000): no end.
func timeSpan(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	m := timeSpanPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a TimeSpan ([-][d.]hh:mm:ss[.fffffff])", s)
	}
	days, _ := strconv.Atoi(m[2])
	h, _ := strconv.Atoi(m[3])
	min, _ := strconv.Atoi(m[4])
	sec, _ := strconv.ParseFloat(m[5], 64)
	d := time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(min)*time.Minute + time.Duration(sec*float64(time.Second))
	if m[1] == "-" {
		return -d, nil
	}
	return d, nil
}

var timeSpanPattern = regexp.MustCompile(`^(-?)(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2}(?:\.\d+)?)$`)

// LoadQueueConfig reads queue properties from a Service Bus emulator config
// file (infra/local/servicebus-emulator-config.json), the one place queue
// properties are written down for local runs.
func LoadQueueConfig(path string) (map[string]devbus.QueueProperties, error) {
	var cfg struct {
		UserConfig struct {
			Namespaces []struct {
				Queues []struct {
					Name       string
					Properties struct {
						RequiresSession                     bool
						MaxDeliveryCount                    int
						RequiresDuplicateDetection          bool
						DuplicateDetectionHistoryTimeWindow string
						LockDuration                        string
						DefaultMessageTimeToLive            string
						DeadLetteringOnMessageExpiration    bool
					}
				}
			}
		}
	}
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("queue config %s: %w", path, err)
	}
	out := map[string]devbus.QueueProperties{}
	for _, ns := range cfg.UserConfig.Namespaces {
		for _, q := range ns.Queues {
			p := q.Properties
			var durations [3]time.Duration
			for i, iso := range []string{p.DuplicateDetectionHistoryTimeWindow, p.LockDuration, p.DefaultMessageTimeToLive} {
				if durations[i], err = isoDuration(iso); err != nil {
					return nil, fmt.Errorf("queue %s: %w", q.Name, err)
				}
			}
			out[q.Name] = devbus.QueueProperties{RequiresSession: p.RequiresSession, MaxDeliveryCount: p.MaxDeliveryCount,
				RequiresDuplicateDetection: p.RequiresDuplicateDetection, DuplicateDetectionWindow: durations[0],
				LockDuration: durations[1], DefaultMessageTimeToLive: durations[2],
				DeadLetteringOnMessageExpiration: p.DeadLetteringOnMessageExpiration}
		}
	}
	return out, nil
}

var isoPattern = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$`)

// isoDuration parses the ISO 8601 durations Service Bus uses (P1D, PT10M, …).
func isoDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	m := isoPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration", s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] != "" {
			n, _ := strconv.Atoi(m[i+1])
			d += time.Duration(n) * unit
		}
	}
	return d, nil
}
