package devhost

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Stage lays out a function app in dir the way `make stage` does (host.json,
// <Name>/function.json, the handler binary), from the project at root.
// edit, if not nil, may change host.json (name "host.json") or a function's
// function.json (by function name) on the way: tests stage variants with it.
func Stage(root, binary, dir string, edit func(name string, doc map[string]any)) error {
	copyJSON := func(from, to, name string) error {
		var doc map[string]any
		data, err := os.ReadFile(from)
		if err == nil {
			err = json.Unmarshal(data, &doc)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", from, err)
		}
		if edit != nil {
			edit(name, doc)
		}
		data, _ = json.Marshal(doc)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	}
	if err := copyJSON(filepath.Join(root, "host.json"), filepath.Join(dir, "host.json"), "host.json"); err != nil {
		return err
	}
	exe, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "convoy"), exe, 0o755); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	if len(files) == 0 {
		return fmt.Errorf("no functions/*/function.json under %s", root)
	}
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		if err := copyJSON(f, filepath.Join(dir, name, "function.json"), name); err != nil {
			return err
		}
	}
	return nil
}
