package infracheck

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The deployment as the checks see it: main.bicep and the modules it calls,
// each file evaluated with the parameters its caller passes (those known
// before deploying: a module's output is not), each resource once per
// iteration of its loop. Queues, tables, app settings and role assignments
// made by loops over the domains are read here, not from the source text.

// instance is one resource of the deployment: a declaration, in one
// iteration of its loop.
type instance struct {
	resource
	e       *evaluator
	it      map[string]any // the loop's bindings; nil outside a loop
	typ     string         // the type without its API version
	name    string         // "" when nameErr
	nameErr error
}

// value evaluates a property of the instance.
func (in instance) value(path ...string) (any, error) {
	if in.e == nil {
		return nil, fmt.Errorf("no such resource")
	}
	n := in.prop(path...)
	if n == nil {
		return nil, fmt.Errorf("%s %s: no %s", in.file.path, in.symbol, strings.Join(path, "."))
	}
	return in.e.eval(n, in.it)
}

// str is a property's value as text; "" when it cannot be computed.
func (in instance) str(path ...string) string {
	v, err := in.value(path...)
	if err != nil {
		return ""
	}
	if b, ok := v.(bool); ok {
		return fmt.Sprint(b)
	}
	return fmt.Sprint(v)
}

type deployment struct {
	instances []instance
	evals     map[string]*evaluator // per file, the evaluator it was read with
	errs      []string              // loops the checks cannot expand
}

// deploy evaluates the templates for one environment name.
func deploy(d deployFiles, env string) deployment {
	dep := deployment{evals: map[string]*evaluator{}}
	var visit func(f *bicepFile, params map[string]any, depth int)
	visit = func(f *bicepFile, params map[string]any, depth int) {
		e := newEvaluator(f, params)
		dep.evals[f.path] = e
		for _, r := range f.resources() {
			typ, _, _ := strings.Cut(r.typ, "@")
			iterations := []map[string]any{nil}
			if r.loop != nil {
				var err error
				if iterations, err = e.iterations(r.loop, nil); err != nil {
					dep.errs = append(dep.errs, fmt.Sprintf("%s %s: %v", f.path, r.symbol, err))
					continue
				}
			}
			for _, it := range iterations {
				in := instance{resource: r, e: e, it: it, typ: typ}
				if v, err := e.eval(r.prop("name"), it); err != nil {
					in.nameErr = err
				} else if s, ok := v.(string); ok {
					in.name = s
				} else {
					in.nameErr = fmt.Errorf("a name that is not a string: %v", v)
				}
				dep.instances = append(dep.instances, in)
			}
		}
		if depth > 3 {
			return
		}
		for _, m := range modules(f) {
			child := d.bicep[filepath.ToSlash(filepath.Join(filepath.Dir(f.path), m.path))]
			if child == nil {
				dep.errs = append(dep.errs, fmt.Sprintf("%s: module %s not found", f.path, m.path))
				continue
			}
			childParams := map[string]any{}
			for k, v := range props(props(m.body, f.src)["params"], f.src) {
				if x, err := e.eval(v, nil); err == nil {
					childParams[k] = x
				}
			}
			visit(child, childParams, depth+1)
		}
	}
	main := d.bicep["infra/main.bicep"]
	if main == nil {
		dep.errs = append(dep.errs, "infra/main.bicep is missing")
		return dep
	}
	visit(main, map[string]any{"environmentName": env, "location": "eastus2"}, 0)
	return dep
}

// ofType are the instances (not references) of a resource type, by name.
func (dep deployment) ofType(typ string) map[string]instance {
	out := map[string]instance{}
	for _, in := range dep.instances {
		if in.typ == typ && !in.existing && in.nameErr == nil {
			out[in.name] = in
		}
	}
	return out
}

// bicepDomain is one domain as the templates deploy it (resources.bicep,
// domainResources).
type bicepDomain struct{ name, prefix, queue, table string }

// domains are the deployed domains, in their order.
func (dep deployment) domains() ([]bicepDomain, error) {
	e := dep.evals["infra/modules/resources.bicep"]
	if e == nil {
		return nil, fmt.Errorf("resources.bicep was not evaluated")
	}
	v, err := e.lookup("domainResources", nil)
	if err == nil {
		v, err = e.resolve(v)
	}
	if err != nil {
		return nil, fmt.Errorf("resources.bicep domainResources: %w", err)
	}
	list, _ := asList(v)
	var out []bicepDomain
	for _, x := range list {
		m, _ := x.(map[string]any)
		get := func(k string) string { s, _ := m[k].(string); return s }
		out = append(out, bicepDomain{get("name"), get("prefix"), get("queue"), get("table")})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resources.bicep deploys no domain")
	}
	return out, nil
}

// appSettings are the function app's app settings: literal values as they
// are, values known only in Azure (endpoints, ids, module outputs) as
// "<expr>".
func (dep deployment) appSettings() (map[string]string, error) {
	for _, in := range dep.ofType("Microsoft.Web/sites/config") {
		if in.name != "appsettings" {
			continue
		}
		v, err := in.value("properties")
		if err != nil {
			return nil, fmt.Errorf("%s appsettings: %w", in.file.path, err)
		}
		obj, ok := v.(lazyObject)
		if !ok {
			return nil, fmt.Errorf("%s appsettings: properties are a %T, not an object", in.file.path, v)
		}
		out := map[string]string{}
		for k := range obj {
			out[k] = "<expr>"
			if x, err := in.e.member(obj, k); err == nil {
				switch x.(type) {
				case string, int, bool:
					out[k] = fmt.Sprint(x)
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no Microsoft.Web/sites/config 'appsettings' in the Bicep files")
}

// deployedAppSettings are the app settings of the templates as they are
// deployed for a plain environment name.
func deployedAppSettings(d deployFiles) (map[string]string, error) {
	return deploy(d, "convoy-dev").appSettings()
}

// roleAssignment is one role of one principal on one scope.
type roleAssignment struct{ principal, role, scope string }

func (a roleAssignment) String() string { return a.role + " on " + a.scope }

var guidScope = regexp.MustCompile(`^guid\(([^,]+)\.id,`)

// roleAssignments are the role assignments of roles.bicep, each iteration
// of a loop one, the scope named by its name ("param:<expression>" when
// it is known only in Azure). Errors: a role not of the roles variable, an
// assignment whose name (guid of a scope, a principal, a role) names
// another role or another scope than the one it assigns (two assignments of
// one principal and role on one scope under different names fail in Azure,
// and a loop's name for the orders domain is that of earlier versions only
// with the same scope).
func roleAssignments(d deployFiles) ([]roleAssignment, []string) {
	dep := deploy(d, "convoy-dev")
	errs := dep.errs
	var out []roleAssignment
	for _, in := range dep.instances {
		if in.file.path != "infra/modules/roles.bicep" || in.typ != "Microsoft.Authorization/roleAssignments" {
			continue
		}
		src := in.file.src
		m := roleRef.FindStringSubmatch(in.prop("properties", "roleDefinitionId").Utf8Text(src))
		if m == nil {
			errs = append(errs, in.symbol+": roleDefinitionId does not name a role of the roles variable")
			continue
		}
		name := in.prop("name").Utf8Text(src)
		if n := roleRef.FindStringSubmatch(name); n == nil || n[1] != m[1] {
			errs = append(errs, in.symbol+": the assignment's name (guid) and roleDefinitionId name different roles")
		}
		scopeText := in.prop("scope").Utf8Text(src)
		if g := guidScope.FindStringSubmatch(name); g == nil || g[1] != scopeText {
			errs = append(errs, fmt.Sprintf("%s: the assignment's name is a guid of %v, its scope is %s", in.symbol, g, scopeText))
		}
		scope := "param:" + scopeText
		if v, err := in.value("scope"); err == nil {
			if r, ok := v.(map[string]any); ok {
				scope = fmt.Sprint(r["name"])
			}
		}
		out = append(out, roleAssignment{in.prop("properties", "principalId").Utf8Text(src), m[1], scope})
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out, errs
}
