package infracheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bicep "github.com/tree-sitter-grammars/tree-sitter-bicep/bindings/go"
	ts "github.com/tree-sitter/go-tree-sitter"
)

var root = filepath.Join("..", "..", "..")

// bicepFile is a parsed Bicep file.
type bicepFile struct {
	path string
	src  []byte
	tree *ts.Tree
}

func parseBicep(src []byte) *ts.Tree {
	p := ts.NewParser()
	defer p.Close()
	if err := p.SetLanguage(ts.NewLanguage(bicep.Language())); err != nil {
		panic(err)
	}
	return p.Parse(src, nil)
}

// syntaxError returns the position of the first error in the tree, or "".
func syntaxError(tree *ts.Tree, src []byte) string {
	var find func(n *ts.Node) string
	find = func(n *ts.Node) string {
		if n.IsError() || n.IsMissing() {
			p := n.StartPosition()
			return fmt.Sprintf("line %d, column %d: %q", p.Row+1, p.Column+1, clip(n.Utf8Text(src)))
		}
		if !n.HasError() {
			return ""
		}
		for i := uint(0); i < n.ChildCount(); i++ {
			if s := find(n.Child(i)); s != "" {
				return s
			}
		}
		return "somewhere (the tree has an error)"
	}
	return find(tree.RootNode())
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func loadBicep(t *testing.T) map[string]*bicepFile {
	t.Helper()
	files := map[string]*bicepFile{}
	err := filepath.WalkDir(filepath.Join(root, "infra"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".bicep") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = &bicepFile{path: rel, src: src, tree: parseBicep(src)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d Bicep files under infra/", len(files))
	}
	return files
}

// resource is one resource declaration.
type resource struct {
	symbol, typ string
	existing    bool     // a reference to a resource declared elsewhere
	body        *ts.Node // its object (for a loop, the object of each iteration)
	loop        *ts.Node // the for_statement of a resource loop, else nil
	file        *bicepFile
}

func (f *bicepFile) resources() []resource {
	var out []resource
	root := f.tree.RootNode()
	for i := uint(0); i < root.NamedChildCount(); i++ {
		n := root.NamedChild(i)
		if n.Kind() != "resource_declaration" {
			continue
		}
		r := resource{file: f}
		for j := uint(0); j < n.ChildCount(); j++ {
			c := n.Child(j)
			switch c.Kind() {
			case "existing":
				r.existing = true
			case "identifier":
				r.symbol = c.Utf8Text(f.src)
			case "string":
				r.typ, _ = literal(c, f.src)
			case "object":
				r.body = c
			case "if_statement":
				r.body = conditionalBody(c)
			case "for_statement":
				r.loop = c
				r.body = c.ChildByFieldName("body")
				if r.body != nil && r.body.Kind() == "if_statement" {
					r.body = conditionalBody(r.body)
				}
			}
		}
		out = append(out, r)
	}
	return out
}

// conditionalBody is the object of an if_statement (if (…) { … }).
func conditionalBody(n *ts.Node) *ts.Node {
	for k := uint(0); k < n.NamedChildCount(); k++ {
		if n.NamedChild(k).Kind() == "object" {
			return n.NamedChild(k)
		}
	}
	return nil
}

// ofType returns the resources (not references) of a type.
func ofType(files map[string]*bicepFile, typ string) []resource {
	var out []resource
	for _, f := range files {
		for _, r := range f.resources() {
			if !r.existing && strings.HasPrefix(r.typ, typ+"@") {
				out = append(out, r)
			}
		}
	}
	return out
}

// props maps an object's keys to their value nodes.
func props(obj *ts.Node, src []byte) map[string]*ts.Node {
	out := map[string]*ts.Node{}
	if obj == nil {
		return out
	}
	for i := uint(0); i < obj.NamedChildCount(); i++ {
		p := obj.NamedChild(i)
		if p.Kind() != "object_property" || p.NamedChildCount() < 2 {
			continue
		}
		key := p.NamedChild(0)
		name := key.Utf8Text(src)
		if key.Kind() == "string" {
			name, _ = literal(key, src)
		}
		out[name] = p.NamedChild(p.NamedChildCount() - 1)
	}
	return out
}

// prop follows a path of keys from a resource's body.
func (r resource) prop(path ...string) *ts.Node {
	n := r.body
	for _, k := range path {
		n = props(n, r.file.src)[k]
		if n == nil {
			return nil
		}
	}
	return n
}

// value is the literal value of a node (string content, boolean, number),
// or its source text with ok false.
func literal(n *ts.Node, src []byte) (string, bool) {
	if n == nil {
		return "", false
	}
	switch n.Kind() {
	case "string":
		var b strings.Builder
		for i := uint(0); i < n.NamedChildCount(); i++ {
			c := n.NamedChild(i)
			if c.Kind() != "string_content" {
				return n.Utf8Text(src), false // interpolated
			}
			b.WriteString(c.Utf8Text(src))
		}
		return b.String(), true
	case "boolean", "number", "true", "false":
		return n.Utf8Text(src), true
	}
	text := n.Utf8Text(src)
	return text, text == "true" || text == "false"
}

func (r resource) literal(path ...string) string {
	v, _ := literal(r.prop(path...), r.file.src)
	return v
}

func TestBicepSyntax(t *testing.T) {
	for name, f := range loadBicep(t) {
		if where := syntaxError(f.tree, f.src); where != "" {
			t.Errorf("%s: syntax error at %s", name, where)
		}
	}
	// The check can fail: a broken template is caught.
	broken := []byte("param location string =\nresource sb 'Microsoft.ServiceBus/namespaces@2024-01-01' = {\n  name: 'x'\n")
	if syntaxError(parseBicep(broken), broken) == "" {
		t.Fatal("a broken template parsed without error")
	}
}
