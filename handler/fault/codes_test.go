package fault_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"

	"github.com/convoy-dev/convoy/handler/fault"
)

// TestCodesComplete: every constant of type Code declared in fault.go is in
// fault.Codes (read from the source, not from the list under test).
func TestCodesComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "fault.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, name := range v.Names {
				n++
				lit := v.Values[0].(*ast.BasicLit).Value
				if !slices.Contains(fault.Codes, fault.Code(lit[1:len(lit)-1])) {
					t.Errorf("code %s (%s) is missing from fault.Codes", name.Name, lit)
				}
			}
		}
	}
	if n != len(fault.Codes) || n == 0 {
		t.Errorf("fault.go declares %d codes, fault.Codes lists %d", n, len(fault.Codes))
	}
}
