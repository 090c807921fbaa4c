package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"text/template"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/settings"
)

// `convoy functions` writes the function folders of every registered
// domain that has none (functions/<Name>/function.json): its processor,
// on its queue's setting, and its four operator functions. A domain's
// functions are named and routed by handler.FunctionsOf; their bindings are
// those of the order domain's functions of the same role (TestFunctionFolders
// holds the folders in the repository to what this writes).

// functionFile is one function's folder name and function.json.
type functionFile struct {
	Name string
	JSON []byte
}

// bindings of each role, as functions/Order*/function.json have them.
var bindings = template.Must(template.New("").Parse(`{{define "processor"}}{
  "bindings": [
    {
      "type": "serviceBusTrigger",
      "direction": "in",
      "name": "message",
      "queueName": "%{{.Setting}}%",
      "connection": "ServiceBusConnection",
      "isSessionsEnabled": true,
      "cardinality": "one",
      "dataType": "string"
    }
  ]
}
{{end}}{{define "http"}}{
  "bindings": [
    {
      "type": "httpTrigger",
      "direction": "in",
      "name": "req",
      "methods": ["{{.Method}}"],
      "route": "{{.Route}}",
      "authLevel": "{{.Auth}}"
    },
    {
      "type": "http",
      "direction": "out",
      "name": "res"
    }
  ]
}
{{end}}`))

// domainFunctions are the function folders of domain d.
func domainFunctions(d keyed.Domain) ([]functionFile, error) {
	fns := handler.FunctionsOf(d)
	var out []functionFile
	add := func(name, tmpl string, data any) error {
		var b bytes.Buffer
		if err := bindings.ExecuteTemplate(&b, tmpl, data); err != nil {
			return err
		}
		out = append(out, functionFile{Name: name, JSON: b.Bytes()})
		return nil
	}
	type http struct{ Method, Route, Auth string }
	err := errors.Join(
		add(fns.Processor, "processor", struct{ Setting string }{settings.QueueSetting(d)}),
		add(fns.Status, "http", http{"get", fns.StatusRoute, "function"}),
		add(fns.Blocked, "http", http{"get", fns.BlockedRoute, "function"}),
		add(fns.Replay, "http", http{"post", fns.ReplayRoute, "admin"}),
		add(fns.Skip, "http", http{"post", fns.SkipRoute, "admin"}),
	)
	return out, err
}

// writeFunctions is `convoy functions [--dir DIR]`.
func writeFunctions(args []string) error {
	fs := flag.NewFlagSet("functions", flag.ContinueOnError)
	dir := fs.String("dir", "functions", "the function app's functions folder")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("functions", "functions takes no arguments (got %q)", fs.Args())
	}
	for _, d := range domains.All {
		files, err := domainFunctions(d)
		if err != nil {
			return err
		}
		for _, f := range files {
			path := filepath.Join(*dir, f.Name, "function.json")
			if _, err := os.Stat(path); err == nil {
				continue // written before, perhaps edited since: left as it is
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, f.JSON, 0o644); err != nil {
				return err
			}
			fmt.Printf("wrote %s (domain %s)\n", path, d.Name())
		}
	}
	return nil
}
