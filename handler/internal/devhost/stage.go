package devhost

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Stage lays out the function app of the project at root in dir, as it is
// published (`make stage` runs it: convoy-devhost stage): host.json, the
// handler binary, <Name>/function.json for each functions/<Name>, a
// .funcignore that keeps the local settings out of a publish, and
// local.settings.json when root has one (func start reads it there). dir is
// emptied first, so that a function removed from the project is not
// published from an earlier stage. edit, if not nil, may change host.json
// (name "host.json") or a function's function.json (by function name) on
// the way: tests stage variants with it; without it the files are copied as
// they are.
func Stage(root, binary, dir string, edit func(name string, doc map[string]any)) (functions int, err error) {
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
			data, _ = json.Marshal(doc)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	}
	files, _ := filepath.Glob(filepath.Join(root, "functions", "*", "function.json"))
	if len(files) == 0 {
		return 0, fmt.Errorf("no functions/*/function.json under %s", root)
	}
	if _, err := os.Stat(binary); err != nil {
		return 0, err
	}
	if inside, err := holds(dir, root); err != nil {
		return 0, err
	} else if inside {
		return 0, fmt.Errorf("stage in %s: it holds the project (%s), which emptying it first would delete", dir, root)
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, err
	}
	if err := copyJSON(filepath.Join(root, "host.json"), filepath.Join(dir, "host.json"), "host.json"); err != nil {
		return 0, err
	}
	if err := copyFile(binary, filepath.Join(dir, filepath.Base(binary)), 0o755); err != nil {
		return 0, err
	}
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		if err := copyJSON(f, filepath.Join(dir, name, "function.json"), name); err != nil {
			return 0, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".funcignore"), []byte("local.settings.json\n.funcignore\n"), 0o644); err != nil {
		return 0, err
	}
	settings, err := os.ReadFile(filepath.Join(root, "local.settings.json"))
	switch {
	case err == nil:
		err = os.WriteFile(filepath.Join(dir, "local.settings.json"), settings, 0o644)
	case os.IsNotExist(err):
		err = nil
	}
	return len(files), err
}

// copyFile copies from to a new file to with mode perm, within the kernel
// where it can (io.Copy between files uses copy_file_range): the binary is
// tens of megabytes, staged by every end-to-end test.
func copyFile(from, to string, perm os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// holds reports whether path is dir or lies under it.
func holds(dir, path string) (bool, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(d, p)
	up := rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
	return err == nil && !up, nil
}
