package infracheck

import (
	"fmt"
	"strconv"
	"strings"

	ts "github.com/tree-sitter/go-tree-sitter"
)

// A small evaluator for the Bicep expressions that compute resource names:
// string interpolation, the string functions the templates use, variables,
// parameters, objects, ternaries and user-defined functions. Anything else is
// an error, so a name computed in a way the checks cannot follow fails the
// checks instead of passing unseen.

// testToken stands for uniqueString(…): 13 characters of [a-z0-9], as Azure's.
const testToken = "q7x2m9k4p1z8w"

type evaluator struct {
	f      *bicepFile
	params map[string]any      // values of the file's parameters
	vars   map[string]*ts.Node // variable declarations
	funcs  map[string]*ts.Node // user-defined functions
	memo   map[string]any
}

func newEvaluator(f *bicepFile, params map[string]any) *evaluator {
	e := &evaluator{f: f, params: params, vars: map[string]*ts.Node{}, funcs: map[string]*ts.Node{}, memo: map[string]any{}}
	root := f.tree.RootNode()
	for i := uint(0); i < root.NamedChildCount(); i++ {
		n := root.NamedChild(i)
		switch n.Kind() {
		case "variable_declaration":
			e.vars[n.NamedChild(0).Utf8Text(f.src)] = n.NamedChild(n.NamedChildCount() - 1)
		case "user_defined_function":
			e.funcs[n.ChildByFieldName("name").Utf8Text(f.src)] = n
		}
	}
	return e
}

func (e *evaluator) text(n *ts.Node) string { return n.Utf8Text(e.f.src) }

func (e *evaluator) eval(n *ts.Node, args map[string]any) (any, error) {
	if n == nil {
		return nil, fmt.Errorf("missing expression")
	}
	switch n.Kind() {
	case "string":
		var b strings.Builder
		for i := uint(0); i < n.NamedChildCount(); i++ {
			c := n.NamedChild(i)
			switch c.Kind() {
			case "string_content":
				b.WriteString(e.text(c))
			case "escape_sequence":
				b.WriteString(strings.TrimPrefix(e.text(c), `\`))
			case "interpolation":
				v, err := e.eval(c.NamedChild(0), args)
				if err != nil {
					return nil, err
				}
				fmt.Fprint(&b, v)
			default:
				return nil, fmt.Errorf("string part %s", c.Kind())
			}
		}
		return b.String(), nil
	case "number":
		return strconv.Atoi(e.text(n))
	case "boolean", "true", "false":
		return e.text(n) == "true", nil
	case "parenthesized_expression":
		return e.eval(n.NamedChild(0), args)
	case "identifier":
		name := e.text(n)
		if v, ok := args[name]; ok {
			return v, nil
		}
		if v, ok := e.params[name]; ok {
			return v, nil
		}
		if v, ok := e.memo[name]; ok {
			return v, nil
		}
		if d, ok := e.vars[name]; ok {
			v, err := e.eval(d, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			e.memo[name] = v
			return v, nil
		}
		return nil, fmt.Errorf("unknown name %s", name)
	case "object":
		out := map[string]any{}
		for k, v := range props(n, e.f.src) {
			x, err := e.eval(v, args)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = x
		}
		return out, nil
	case "member_expression":
		obj, err := e.eval(n.ChildByFieldName("object"), args)
		if err != nil {
			return nil, err
		}
		m, ok := obj.(map[string]any)
		key := e.text(n.ChildByFieldName("property"))
		if !ok || m[key] == nil {
			return nil, fmt.Errorf("no member %s", key)
		}
		return m[key], nil
	case "subscript_expression":
		obj, err := e.eval(n.ChildByFieldName("object"), args)
		if err != nil {
			return nil, err
		}
		i, err := e.eval(n.ChildByFieldName("index"), args)
		a, ok := obj.([]string)
		k, _ := i.(int)
		if err != nil || !ok || k >= len(a) {
			return nil, fmt.Errorf("bad index in %s", e.text(n))
		}
		return a[k], nil
	case "ternary_expression":
		c, err := e.eval(n.ChildByFieldName("condition"), args)
		if err != nil {
			return nil, err
		}
		if c == true {
			return e.eval(n.ChildByFieldName("consequence"), args)
		}
		return e.eval(n.ChildByFieldName("alternative"), args)
	case "unary_expression":
		v, err := e.eval(n.NamedChild(0), args)
		if b, ok := v.(bool); ok && err == nil && strings.HasPrefix(e.text(n), "!") {
			return !b, nil
		}
		return nil, fmt.Errorf("unary %s", e.text(n))
	case "binary_expression":
		return e.binary(n, args)
	case "call_expression":
		return e.call(n, args)
	}
	return nil, fmt.Errorf("cannot evaluate %s %q", n.Kind(), clip(e.text(n)))
}

func (e *evaluator) binary(n *ts.Node, args map[string]any) (any, error) {
	l, err := e.eval(n.ChildByFieldName("left"), args)
	if err != nil {
		return nil, err
	}
	r, err := e.eval(n.ChildByFieldName("right"), args)
	if err != nil {
		return nil, err
	}
	op := strings.TrimSpace(e.text(n.Child(1)))
	li, lint := l.(int)
	ri, rint := r.(int)
	switch {
	case op == "==":
		return l == r, nil
	case op == "!=":
		return l != r, nil
	case op == "&&" || op == "||":
		lb, _ := l.(bool)
		rb, _ := r.(bool)
		if op == "&&" {
			return lb && rb, nil
		}
		return lb || rb, nil
	case lint && rint:
		switch op {
		case "+":
			return li + ri, nil
		case "-":
			return li - ri, nil
		case "<":
			return li < ri, nil
		case ">":
			return li > ri, nil
		case "<=":
			return li <= ri, nil
		case ">=":
			return li >= ri, nil
		}
	}
	return nil, fmt.Errorf("operator %s on %v, %v", op, l, r)
}

func (e *evaluator) call(n *ts.Node, args map[string]any) (any, error) {
	name := e.text(n.ChildByFieldName("function"))
	var in []any
	if a := n.ChildByFieldName("arguments"); a != nil {
		for i := uint(0); i < a.NamedChildCount(); i++ {
			v, err := e.eval(a.NamedChild(i), args)
			if err != nil {
				return nil, err
			}
			in = append(in, v)
		}
	}
	if fn, ok := e.funcs[name]; ok {
		var ps *ts.Node
		for i := uint(0); i < fn.NamedChildCount(); i++ {
			if fn.NamedChild(i).Kind() == "parameters" {
				ps = fn.NamedChild(i)
			}
		}
		if ps == nil {
			return nil, fmt.Errorf("%s: no parameters", name)
		}
		bound := map[string]any{}
		for i := uint(0); i < ps.NamedChildCount() && int(i) < len(in); i++ {
			bound[e.text(ps.NamedChild(i).NamedChild(0))] = in[i]
		}
		if int(ps.NamedChildCount()) != len(in) {
			return nil, fmt.Errorf("%s: %d arguments for %d parameters", name, len(in), ps.NamedChildCount())
		}
		return e.eval(fn.NamedChild(fn.NamedChildCount()-1), bound)
	}
	str := func(i int) string {
		if i < len(in) {
			s, _ := in[i].(string)
			return s
		}
		return ""
	}
	num := func(i int) int {
		if i < len(in) {
			k, _ := in[i].(int)
			return k
		}
		return 0
	}
	switch name {
	case "toLower":
		return strings.ToLower(str(0)), nil
	case "toUpper":
		return strings.ToUpper(str(0)), nil
	case "replace":
		return strings.ReplaceAll(str(0), str(1), str(2)), nil
	case "take":
		s, k := str(0), num(1)
		if k < 0 {
			k = 0
		}
		if k < len(s) {
			s = s[:k]
		}
		return s, nil
	case "endsWith":
		return strings.HasSuffix(str(0), str(1)), nil
	case "startsWith":
		return strings.HasPrefix(str(0), str(1)), nil
	case "length":
		return len(str(0)), nil
	case "empty":
		return str(0) == "", nil
	case "split":
		return strings.Split(str(0), str(1)), nil
	case "uniqueString":
		return testToken, nil
	case "subscription":
		return map[string]any{"id": "/subscriptions/00000000-0000-0000-0000-000000000000", "subscriptionId": "00000000-0000-0000-0000-000000000000"}, nil
	}
	return nil, fmt.Errorf("function %s is not understood by the checks", name)
}
