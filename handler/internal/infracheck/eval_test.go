package infracheck

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	ts "github.com/tree-sitter/go-tree-sitter"
)

// A small evaluator for the Bicep expressions that compute resource names
// and the values the checks read: string interpolation (keys of objects
// too), the functions the templates use, variables, parameters (their
// defaults when not given), objects, arrays, ternaries, user-defined
// functions, lambdas (map, reduce), loops ([for x in <array>: …],
// [for (x, i) in …], range()) of resources and of variables, and references
// to resources (their name and id). Anything else is an error, so a value
// computed in a way the checks cannot follow fails the checks instead of
// passing unseen.

// testToken stands for uniqueString(…): 13 characters of [a-z0-9], as Azure's.
const testToken = "q7x2m9k4p1z8w"

type evaluator struct {
	f         *bicepFile
	params    map[string]any      // values of the file's parameters
	defaults  map[string]*ts.Node // default values of its parameters, for those not given
	vars      map[string]*ts.Node // variable declarations
	funcs     map[string]*ts.Node // user-defined functions
	resources map[string]resource // resource declarations, by symbol
	memo      map[string]any
}

func newEvaluator(f *bicepFile, params map[string]any) *evaluator {
	e := &evaluator{f: f, params: params, defaults: map[string]*ts.Node{}, vars: map[string]*ts.Node{},
		funcs: map[string]*ts.Node{}, resources: map[string]resource{}, memo: map[string]any{}}
	root := f.tree.RootNode()
	for i := uint(0); i < root.NamedChildCount(); i++ {
		n := root.NamedChild(i)
		switch n.Kind() {
		case "variable_declaration":
			e.vars[n.NamedChild(0).Utf8Text(f.src)] = n.NamedChild(n.NamedChildCount() - 1)
		case "parameter_declaration":
			if n.NamedChildCount() == 3 { // name, type, default
				e.defaults[n.NamedChild(0).Utf8Text(f.src)] = n.NamedChild(2)
			}
		case "user_defined_function":
			e.funcs[n.ChildByFieldName("name").Utf8Text(f.src)] = n
		}
	}
	for _, r := range f.resources() {
		e.resources[r.symbol] = r
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
		multiline := strings.HasPrefix(e.text(n), "'''")
		for i := uint(0); i < n.NamedChildCount(); i++ {
			c := n.NamedChild(i)
			switch c.Kind() {
			case "string_content":
				text := e.text(c)
				if multiline && i == 0 { // Bicep drops the line break right after '''
					text = strings.TrimPrefix(strings.TrimPrefix(text, "\r"), "\n")
				}
				b.WriteString(text)
			case "escape_sequence":
				b.WriteString(unescape(e.text(c)))
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
		return e.lookup(e.text(n), args)
	case "object":
		return e.object(n, args)
	case "lambda_expression":
		return e.lambda(n, args)
	case "for_statement":
		// A variable loop: the array of its body for each iteration.
		its, err := e.iterations(n, args)
		if err != nil {
			return nil, err
		}
		out := []any{}
		for _, it := range its {
			v, err := e.eval(n.ChildByFieldName("body"), it)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case "array":
		var out []any
		for i := uint(0); i < n.NamedChildCount(); i++ {
			v, err := e.eval(n.NamedChild(i), args)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out = append(out, v)
		}
		return out, nil
	case "member_expression":
		if n.ChildByFieldName("object").Kind() == "lambda_expression" {
			// The grammar reads x => x.y as (x => x).y, which Bicep does not.
			return nil, fmt.Errorf("%q: write the lambda's body in parentheses, x => (x.y), or a for-expression", e.text(n))
		}
		obj, err := e.eval(n.ChildByFieldName("object"), args)
		if err != nil {
			return nil, err
		}
		key := e.text(n.ChildByFieldName("property"))
		switch o := obj.(type) {
		case lazyObject:
			if _, ok := o[key]; ok {
				x, err := e.member(o, key)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", key, err)
				}
				return x, nil
			}
		case map[string]any:
			if o[key] != nil {
				return o[key], nil
			}
		}
		return nil, fmt.Errorf("no member %s", key)
	case "subscript_expression":
		obj, err := e.eval(n.ChildByFieldName("object"), args)
		if err != nil {
			return nil, err
		}
		i, err := e.eval(n.ChildByFieldName("index"), args)
		a, ok := asList(obj)
		k, _ := i.(int)
		if err != nil || !ok || k < 0 || k >= len(a) {
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

// lookup is the value of a name: a binding (loop variable, function
// parameter), a parameter (given, else its default), a variable or a resource.
func (e *evaluator) lookup(name string, args map[string]any) (any, error) {
	if v, ok := args[name]; ok {
		return v, nil
	}
	if v, ok := e.params[name]; ok {
		return v, nil
	}
	if v, ok := e.memo[name]; ok {
		return v, nil
	}
	d, ok := e.vars[name]
	if !ok {
		d, ok = e.defaults[name]
	}
	if ok {
		v, err := e.eval(d, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		e.memo[name] = v
		return v, nil
	}
	if r, ok := e.resources[name]; ok {
		if e.memo[" reading "+name] != nil {
			return nil, fmt.Errorf("resource %s refers to itself", name)
		}
		e.memo[" reading "+name] = true
		v, err := e.resourceValue(r)
		delete(e.memo, " reading "+name)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", name, err)
		}
		e.memo[name] = v
		return v, nil
	}
	return nil, fmt.Errorf("unknown name %s", name)
}

// resolve evaluates every member of an object, and every element of an
// array, all the way down: the value as JSON would hold it.
func (e *evaluator) resolve(v any) (any, error) {
	switch x := v.(type) {
	case lazyObject:
		out := map[string]any{}
		for k := range x {
			m, err := e.member(x, k)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if out[k], err = e.resolve(m); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, m := range x {
			var err error
			if out[i], err = e.resolve(m); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return out, nil
	}
	return v, nil
}

// unescape reads one escape of a Bicep string: \n \r \t \\ \' \$ and \u{…}.
func unescape(s string) string {
	switch s {
	case `\n`:
		return "\n"
	case `\r`:
		return "\r"
	case `\t`:
		return "\t"
	}
	if strings.HasPrefix(s, `\u{`) {
		if r, err := strconv.ParseUint(strings.TrimSuffix(s[3:], "}"), 16, 32); err == nil {
			return string(rune(r))
		}
	}
	return strings.TrimPrefix(s, `\`)
}

// lazyObject is an object: its members' expressions, each evaluated when
// read (a name reads one member, r.name, of objects whose other members the
// checks need not follow, or cannot: a module's output), with the bindings
// (loop variables, function parameters) in force where it was written. The
// keys are known: an interpolated key is evaluated with the object.
type lazyObject map[string]lazyMember

type lazyMember struct {
	e     *evaluator // of the file it was written in: an object may be passed to a module
	node  *ts.Node
	args  map[string]any
	value any // a value already known (union of a resolved object), when node is nil
}

// object evaluates an object literal's keys.
func (e *evaluator) object(n *ts.Node, args map[string]any) (any, error) {
	out := lazyObject{}
	for i := uint(0); i < n.NamedChildCount(); i++ {
		p := n.NamedChild(i)
		if p.Kind() != "object_property" || p.NamedChildCount() < 2 {
			continue
		}
		key := p.NamedChild(0)
		name := e.text(key)
		if key.Kind() == "string" {
			k, err := e.eval(key, args)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", name, err)
			}
			name = fmt.Sprint(k)
		}
		out[name] = lazyMember{e: e, node: p.NamedChild(p.NamedChildCount() - 1), args: args}
	}
	return out, nil
}

// member evaluates one member of an object.
func (e *evaluator) member(o lazyObject, key string) (any, error) {
	m := o[key]
	if m.node == nil {
		return m.value, nil
	}
	return m.e.eval(m.node, m.args)
}

// lambda is a lambda expression (x => …, (a, b) => …) with the bindings in
// force where it was written.
type lambda struct {
	e      *evaluator
	params []string
	body   *ts.Node
	args   map[string]any
}

func (e *evaluator) lambda(n *ts.Node, args map[string]any) (any, error) {
	l := lambda{e: e, body: n.NamedChild(n.NamedChildCount() - 1), args: args}
	switch p := n.NamedChild(0); p.Kind() {
	case "identifier":
		l.params = []string{e.text(p)}
	case "parenthesized_expression":
		for i := uint(0); i < p.NamedChildCount(); i++ {
			l.params = append(l.params, e.text(p.NamedChild(i)))
		}
	default:
		return nil, fmt.Errorf("lambda parameters %q", e.text(p))
	}
	return l, nil
}

// apply calls a lambda with values for its parameters.
func (e *evaluator) apply(l lambda, in ...any) (any, error) {
	if len(in) < len(l.params) {
		return nil, fmt.Errorf("lambda of %d parameters given %d", len(l.params), len(in))
	}
	b := map[string]any{}
	for k, v := range l.args {
		b[k] = v
	}
	for i, p := range l.params {
		b[p] = in[i]
	}
	return l.e.eval(l.body, b)
}

// resourceValue is what a reference to a resource reads: its name and id
// (a stand-in of the id's shape), or the list of them for a loop.
func (e *evaluator) resourceValue(r resource) (any, error) {
	typ, _, _ := strings.Cut(r.typ, "@")
	one := func(it map[string]any) (any, error) {
		name, err := e.eval(r.prop("name"), it)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": name, "id": fmt.Sprintf("/%s/%v", typ, name)}, nil
	}
	if r.loop == nil {
		return one(nil)
	}
	its, err := e.iterations(r.loop, nil)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, it := range its {
		v, err := one(it)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// asList is an array's elements (an array literal, split(), range()).
func asList(v any) ([]any, bool) {
	switch a := v.(type) {
	case []any:
		return a, true
	case []string:
		out := make([]any, len(a))
		for i, s := range a {
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

// iterations expands a loop (a for_statement: [for x in <array>: …] or
// [for (x, i) in <array>: …]) into the bindings of each iteration: the item
// variable, and the index variable when there is one. The array must be
// one the evaluator computes (a literal, a variable holding one, split(),
// range()); any other, such as a parameter, is an error, so a loop is never
// skipped unseen.
func (e *evaluator) iterations(loop *ts.Node, args map[string]any) ([]map[string]any, error) {
	var item, index string
	var array *ts.Node
	afterIn := false
	for i := uint(0); i < loop.ChildCount(); i++ {
		c := loop.Child(i)
		switch {
		case c.Kind() == "in":
			afterIn = true
		case afterIn && c.IsNamed() && array == nil:
			array = c
		case c.Kind() == "for_loop_parameters":
			for j := uint(0); j < c.NamedChildCount(); j++ {
				switch p := c.NamedChild(j); p.Kind() {
				case "loop_variable":
					item = e.text(p)
				case "loop_enumerator":
					index = e.text(p)
				}
			}
		case loop.FieldNameForChild(uint32(i)) == "initializer":
			item = e.text(c)
		}
	}
	if item == "" || array == nil {
		return nil, fmt.Errorf("a loop the checks cannot read: %q", clip(e.text(loop)))
	}
	v, err := e.eval(array, args)
	if err != nil {
		return nil, fmt.Errorf("loop over %s: %w", clip(e.text(array)), err)
	}
	list, ok := asList(v)
	if !ok {
		return nil, fmt.Errorf("loop over %s: not an array", clip(e.text(array)))
	}
	var out []map[string]any
	for k, x := range list {
		b := map[string]any{}
		for name, a := range args {
			b[name] = a
		}
		b[item] = x
		if index != "" {
			b[index] = k
		}
		out = append(out, b)
	}
	return out, nil
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
		case "*":
			return li * ri, nil
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
	first := func(in []any) any {
		if len(in) == 0 {
			return nil
		}
		return in[0]
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
	case "string":
		if len(in) == 1 {
			switch x := in[0].(type) {
			case int:
				return strconv.Itoa(x), nil
			case string:
				return x, nil
			case lazyObject, []any:
				// An object or array: its JSON, as Bicep's string() writes it.
				v, err := e.resolve(x)
				if err != nil {
					return nil, err
				}
				data, err := json.Marshal(v)
				return string(data), err
			}
		}
		return nil, fmt.Errorf("string(%v)", in)
	case "guid":
		// Azure's guid() hashes its arguments into a GUID: deterministic, the
		// same arguments give the same GUID. A stand-in of the same shape.
		sum := sha256.Sum256([]byte(fmt.Sprint(in...)))
		h := hex.EncodeToString(sum[:16])
		return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
	case "resourceGroup":
		return map[string]any{"id": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-test", "name": "rg-test", "location": "eastus2"}, nil
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
		if a, ok := asList(first(in)); ok {
			return a[:min(k, len(a))], nil
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
		if a, ok := asList(first(in)); ok {
			return len(a), nil
		}
		return len(str(0)), nil
	case "empty":
		if a, ok := asList(first(in)); ok {
			return len(a) == 0, nil
		}
		return str(0) == "", nil
	case "skip":
		s, k := str(0), num(1)
		if a, ok := asList(first(in)); ok {
			return a[min(max(k, 0), len(a)):], nil
		}
		return s[min(max(k, 0), len(s)):], nil
	case "join":
		a, ok := asList(first(in))
		if !ok {
			return nil, fmt.Errorf("join of %v", first(in))
		}
		parts := make([]string, len(a))
		for i, x := range a {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("join of a %T", x)
			}
			parts[i] = s
		}
		return strings.Join(parts, str(1)), nil
	case "map", "reduce":
		if len(in) != map[string]int{"map": 2, "reduce": 3}[name] {
			return nil, fmt.Errorf("%s%v", name, in)
		}
		a, ok := asList(in[0])
		f, isLambda := in[len(in)-1].(lambda)
		if !ok || !isLambda {
			return nil, fmt.Errorf("%s%v", name, in)
		}
		if name == "map" {
			out := []any{}
			for i, x := range a {
				v, err := e.apply(f, x, i)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			return out, nil
		}
		acc := in[1]
		for i, x := range a {
			var err error
			if acc, err = e.apply(f, acc, x, i); err != nil {
				return nil, err
			}
		}
		return acc, nil
	case "union":
		// Objects only: the members of each, a later one's winning.
		out := lazyObject{}
		for _, x := range in {
			switch o := x.(type) {
			case lazyObject:
				for k, m := range o {
					out[k] = m
				}
			case map[string]any:
				for k, v := range o {
					out[k] = lazyMember{value: v}
				}
			default:
				return nil, fmt.Errorf("union of a %T", x)
			}
		}
		return out, nil
	case "split":
		return strings.Split(str(0), str(1)), nil
	case "range":
		if len(in) != 2 || num(1) < 0 {
			return nil, fmt.Errorf("range%v", in)
		}
		var out []any
		for i := 0; i < num(1); i++ {
			out = append(out, num(0)+i)
		}
		return out, nil
	case "uniqueString":
		return testToken, nil
	case "subscription":
		return map[string]any{"id": "/subscriptions/00000000-0000-0000-0000-000000000000", "subscriptionId": "00000000-0000-0000-0000-000000000000"}, nil
	}
	return nil, fmt.Errorf("function %s is not understood by the checks", name)
}
