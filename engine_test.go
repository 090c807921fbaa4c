package main

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEngineImportsNoDomain holds docs/architecture.md's split between the
// engine and the domains: no engine package imports a domain package, and
// the engine's core (its first two packages: the engine and the rules'
// API) depends on none through any other package either (go list -deps),
// so that a team's domain is one among others and the engine serves each
// the same.
func TestEngineImportsNoDomain(t *testing.T) {
	t.Parallel()
	page := readPage(t, "docs/architecture.md")
	engine, domains := namedList(t, page, "Engine packages"), namedList(t, page, "Domain packages")
	imports := packageImports(t)
	for i, pkg := range engine {
		deps := imports[pkg]
		if i < 2 {
			out, err := exec.Command("go", "list", "-deps", "./"+pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", pkg, err)
			}
			deps = nil
			for _, dep := range strings.Fields(string(out)) {
				if rel, ok := strings.CutPrefix(dep, module+"/"); ok {
					deps = append(deps, rel)
				}
			}
		}
		for _, dep := range deps {
			if slices.Contains(domains, dep) {
				t.Errorf("engine package %s depends on domain package %s: the engine names no domain (docs/architecture.md)", pkg, dep)
			}
		}
	}
}

// namedList reads the packages of the line "<name>: `a`, `b`…" of page.
func namedList(t *testing.T, page, name string) []string {
	t.Helper()
	line := regexp.MustCompile(`(?m)^` + name + `: (.*)$`).FindStringSubmatch(page)
	if line == nil {
		t.Fatalf("docs/architecture.md has no line %q", name+": …")
	}
	var pkgs []string
	for _, m := range backticked.FindAllStringSubmatch(line[1], -1) {
		pkgs = append(pkgs, m[1])
	}
	if len(pkgs) == 0 {
		t.Fatalf("docs/architecture.md's %q names no package", name)
	}
	return pkgs
}
