package main

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/convoy-dev/convoy"

// TestArchitecture holds the code to docs/architecture.md's tables: every
// package has a row, every row a package, and a package's non-test code
// imports only the project's packages its row allows. And the root's command
// files reach the HTTP package for nothing: serve.go alone wires it.
func TestArchitecture(t *testing.T) {
	t.Parallel()
	allowed := architectureRows(t)
	imports := packageImports(t)
	for pkg, got := range imports {
		may, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md", pkg)
			continue
		}
		for _, imp := range got {
			if !slices.Contains(may, imp) {
				t.Errorf("%s imports %s, which its row in docs/architecture.md does not allow (it allows %v)", pkg, imp, may)
			}
		}
	}
	for pkg := range allowed {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("docs/architecture.md has a row for %s, which is no package", pkg)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		// serve.go wires the HTTP functions; functions.go writes their
		// folders, named and routed as serve.go serves them.
		if strings.HasSuffix(f, "_test.go") || f == "serve.go" || f == "functions.go" {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if imp.Path.Value == `"`+module+`/handler"` {
				t.Errorf("%s imports the HTTP package: the command line is a client of the use cases, and serve.go alone wires the HTTP functions (functions.go writes their folders)", f)
			}
		}
	}
}

var (
	rowPackage = regexp.MustCompile("^\\| `([^`]+)`")
	backticked = regexp.MustCompile("`([^`]+)`")
)

// architectureRows reads the tables' rows: each package named in the first
// cell (before any parenthesis), with the packages of the last cell.
func architectureRows(t *testing.T) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(readPage(t, "docs/architecture.md"), "\n") {
		if !rowPackage.MatchString(line) {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		first, _, _ := strings.Cut(cells[0], "(")
		var may []string
		for _, m := range backticked.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			may = append(may, m[1])
		}
		for _, m := range backticked.FindAllStringSubmatch(first, -1) {
			rows[m[1]] = may
		}
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md has no package rows")
	}
	return rows
}

// packageImports is each package of the module (as docs/architecture.md
// names it: "." for the root) with the module's packages its non-test files
// import.
func packageImports(t *testing.T) map[string][]string {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		var own []string
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				own = append(own, rel)
			}
		}
		imports[relative(p.ImportPath)] = own
	}
	return imports
}

func relative(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}
