// Package perm compiles Permify's schema language (`entity`, `relation @type`,
// `attribute name type`, `permission`/`action name = expr`, `rule name(params) { CEL }`)
// into the same ir.Schema as SpiceDB's .zed, so one engine serves both.
//
// The lowering, which the server's Permify adapter relies on:
//   - an entity is a definition; a relation keeps its subject types; a permission or
//     action is a permission; `rel.perm` is an arrow; `or`/`and`/`not` are union,
//     intersection and exclusion, all of one precedence, grouped left to right.
//   - an attribute `a T` of entity E is a relation `a` whose subjects are wildcards
//     carrying a value caveat (`latch_boolean(value bool) { value }` and friends): a
//     stored value is the relationship `E:id#a@X:*` with caveat context {"value": v}.
//     A boolean attribute allows every entity type X as the wildcard, so a check of
//     any subject type matches it and the caveat decides; other attribute types allow
//     only E itself (they only hold data for rules).
//   - a rule is a caveat with the rule's parameters (plus `context map<any>` when the
//     body reads `context.data...`). A call `r(a, b)` in entity E is a relation
//     `rule_r_N` whose subjects are wildcards of every entity type with caveat r; the
//     adapter writes `E:id#rule_r_N@X:*` with the attribute values as caveat context
//     whenever E:id's attributes change.
//   - doc comments `// permify:attribute T`, `// permify:call r(a, b)`, `// permify:rule`
//     and `// permify:value` mark the synthetic members, so the Permify view of a
//     schema (Inspect) can be rebuilt from the IR or its .zed rendering alone.
//
// By default names follow SpiceDB's rules (3 to 64 characters, lower case), because a
// schema the SpiceDB API also serves is stored as .zed text; CompileWith's PermifyNames
// accepts Permify's own, shorter names for schemas only the Permify API serves.
package perm

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/check"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// Doc markers of synthetic members.
const (
	docAttribute = "// permify:attribute "
	docCall      = "// permify:call "
	docRule      = "// permify:rule"
	docValue     = "// permify:value"
)

// valueCaveatPrefix names the caveats that carry attribute values.
const valueCaveatPrefix = "latch_"

// Options tune compilation.
type Options struct {
	// PermifyNames accepts Permify's names (1 to 64 letters, digits and underscores,
	// any case) instead of SpiceDB's stricter ones. A schema compiled so has no valid
	// .zed rendering, so only the Permify API may serve it.
	PermifyNames bool
}

// Compile parses and checks Permify schema text with SpiceDB's naming rules, so its
// .zed rendering serves the SpiceDB API too. On failure the error is a
// *schema.DiagnosticsError whose positions are in src.
func Compile(src string) (*ir.Schema, error) { return CompileWith(src, Options{}) }

// CompileWith is Compile with options.
func CompileWith(src string, opts Options) (*ir.Schema, error) {
	return CompileContext(context.Background(), src, opts)
}

// CompileContext is CompileWith that gives up when ctx ends, returning ctx's error.
func CompileContext(ctx context.Context, src string, opts Options) (*ir.Schema, error) {
	stop := ast.NewStopper(ctx)
	f, diags := parse(src, stop)
	if err := stop.Err(); err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		return nil, &schema.DiagnosticsError{Diagnostics: diags}
	}
	l := &lowerer{f: f}
	out := l.file()
	var rn *renamer
	if opts.PermifyNames {
		l.checkNames()
		rn = newRenamer(out)
		rn.apply(out)
	}
	if len(l.diags) > 0 {
		check.Sort(l.diags)
		return nil, &schema.DiagnosticsError{Diagnostics: l.diags}
	}
	s, diags, err := check.CheckContext(ctx, out)
	if err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		for i := range diags {
			if rn != nil {
				diags[i].Msg = rn.message(diags[i].Msg)
			}
			diags[i].Msg = permifyTerms.Replace(diags[i].Msg)
		}
		return nil, &schema.DiagnosticsError{Diagnostics: diags}
	}
	if rn != nil {
		s = rn.restore(s)
	}
	return s, nil
}

// permifyTerms rewords the shared checker's SpiceDB vocabulary in Permify's.
var permifyTerms = strings.NewReplacer("definition `", "entity `", "invalid definition name", "invalid entity name", "under definition", "in entity",
	"in definition", "in entity", "caveat `", "rule `", "caveat expression", "rule body")

type lowerer struct {
	f     *file
	diags []ast.Diagnostic

	entities map[string]*entity
	rules    map[string]*rule
	kinds    map[string]ast.Pos // value caveats needed, by attribute type
}

func (l *lowerer) errorf(at ast.Pos, format string, args ...any) {
	l.diags = append(l.diags, ast.Diagnostic{Pos: at, Msg: fmt.Sprintf(format, args...)})
}

func (l *lowerer) file() *ast.File {
	l.entities, l.rules, l.kinds = map[string]*entity{}, map[string]*rule{}, map[string]ast.Pos{}
	for _, e := range l.f.entities {
		if _, dup := l.entities[e.name]; !dup {
			l.entities[e.name] = e
		}
	}
	out := &ast.File{}
	for _, r := range l.f.rules {
		if c := l.rule(r); c != nil {
			out.Caveats = append(out.Caveats, c)
		}
	}
	for _, e := range l.f.entities {
		out.Definitions = append(out.Definitions, l.entity(e))
	}
	for _, kind := range sortedKeys(l.kinds) {
		out.Caveats = append(out.Caveats, valueCaveat(kind, l.kinds[kind]))
	}
	return out
}

var contextRef = regexp.MustCompile(`\bcontext\b`)

func (l *lowerer) rule(r *rule) *ast.Caveat {
	if first, dup := l.rules[r.name]; dup {
		l.errorf(r.namePos, "duplicate rule `%s` (first defined at %d:%d)", r.name, first.namePos.Line, first.namePos.Col)
		return nil
	}
	l.rules[r.name] = r
	if strings.HasPrefix(r.name, valueCaveatPrefix) {
		l.errorf(r.namePos, "rule name `%s` is reserved: names starting with `%s` hold attribute values", r.name, valueCaveatPrefix)
	}
	c := &ast.Caveat{Pos: r.pos, Name: r.name, NamePos: r.namePos, Doc: docRule, Expr: r.body, ExprPos: r.bodyPos}
	for _, p := range r.params {
		if p.name == "context" {
			l.errorf(p.pos, "parameter name `context` is reserved in rule `%s`: the request context is read as `context.data`", r.name)
			continue
		}
		c.Params = append(c.Params, &ast.Param{Pos: p.pos, Name: p.name, Type: celType(p.typ), TypePos: p.typePos})
	}
	if contextRef.MatchString(r.body) {
		c.Params = append(c.Params, &ast.Param{Pos: r.namePos, Name: "context", Type: "map<any>", TypePos: r.namePos})
	}
	if len(c.Params) == 0 {
		l.errorf(r.namePos, "rule `%s` has no parameters and does not read `context.data`: its answer could never change", r.name)
	}
	return c
}

// celType maps a Permify type to the caveat type that holds it.
func celType(t string) string {
	base, isList := strings.CutSuffix(t, "[]")
	c := map[string]string{"boolean": "bool", "string": "string", "integer": "int", "double": "double"}[base]
	if isList {
		return "list<" + c + ">"
	}
	return c
}

// valueCaveat is the caveat that carries values of attribute type kind. Only the
// boolean one is ever evaluated (a boolean attribute used as a permission); the others
// just hold data, and their expression only needs to use the parameter and be true.
func valueCaveat(kind string, at ast.Pos) *ast.Caveat {
	expr := "value"
	if kind != "boolean" {
		expr = "value == value"
	}
	return &ast.Caveat{
		Pos: at, Name: ValueCaveat(kind), NamePos: at, Doc: docValue, ExprPos: at, Expr: expr,
		Params: []*ast.Param{{Pos: at, Name: "value", Type: celType(kind), TypePos: at}},
	}
}

// ValueCaveat names the caveat that carries values of the Permify attribute type t.
func ValueCaveat(t string) string {
	base, isList := strings.CutSuffix(t, "[]")
	if isList {
		return valueCaveatPrefix + base + "_array"
	}
	return valueCaveatPrefix + base
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
