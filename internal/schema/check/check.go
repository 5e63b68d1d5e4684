// Package check owns name resolution and type checking: it turns a parsed schema
// (ast.File, from either language's parser) into a compiled ir.Schema, or reports
// every problem it finds, each positioned, sorted by position.
//
// The rules are SpiceDB's (its type system and schema compiler): names must match
// SpiceDB's patterns; definitions, relations, caveats and parameters are unique;
// referenced types, relations, permissions and caveats exist; an arrow's left side
// is a relation of the same definition, never a permission, and never reaches a
// wildcard; a subject relation of another definition never reaches a wildcard; a
// relation allows at least one subject type, each at most once; `with expiration`
// needs `use expiration`; caveat parameter types and expressions compile and every
// parameter is used; permissions that merely alias each other may not form a cycle.
// Recursion through arrows or operators is legal.
package check

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// Diagnostic is one positioned problem; String() renders "line:col: msg".
type Diagnostic = ast.Diagnostic

var (
	definitionName = regexp.MustCompile(`^([a-z][a-z0-9_]{1,62}[a-z0-9]/)*[a-z][a-z0-9_]{1,62}[a-z0-9]$`)
	relationName   = regexp.MustCompile(`^[a-z][a-z0-9_]{1,62}[a-z0-9]$`)
	caveatName     = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9/_|-]{0,127}$`)
)

// maxDefinitionName is SpiceDB's limit on a definition name in bytes.
const maxDefinitionName = 128

// Check compiles f. It returns the schema, or nil and every diagnostic sorted by
// position.
func Check(f *ast.File) (*ir.Schema, []Diagnostic) {
	s, diags, _ := CheckContext(context.Background(), f)
	return s, diags
}

// CheckContext is Check that gives up when ctx ends, returning ctx's error.
func CheckContext(ctx context.Context, f *ast.File) (*ir.Schema, []Diagnostic, error) {
	c := &checker{file: f, uses: map[string]bool{}, noWildcard: map[string]bool{}, stop: ast.NewStopper(ctx)}
	s := c.run()
	if err := c.stop.Err(); err != nil {
		return nil, nil, err
	}
	if len(c.diags) > 0 {
		Sort(c.diags)
		return nil, c.diags, nil
	}
	return s, nil, nil
}

// Sort orders diagnostics by position (then message).
func Sort(d []Diagnostic) {
	slices.SortStableFunc(d, func(a, b Diagnostic) int {
		switch {
		case a.Before(b):
			return -1
		case b.Before(a):
			return 1
		}
		return 0
	})
}

type checker struct {
	file  *ast.File
	diags []Diagnostic
	uses  map[string]bool

	defs    map[string]*ast.Definition // first declaration of each name
	caveats map[string]*ast.Caveat
	schema  *ir.Schema
	// typePos remembers where each allowed subject type was written, for diagnostics
	// found after the IR is built.
	typePos map[*ir.Relation][]*ast.TypeRef
	// noWildcard remembers the relation names wildcardVia found no wildcard for (see
	// there).
	noWildcard map[string]bool
	// stop ends the work early when the caller has gone; what was built is discarded.
	stop *ast.Stopper
}

func (c *checker) errorf(at ast.Pos, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: at, Msg: fmt.Sprintf(format, args...)})
}

// typeErrorf reports a type error about the names in about (see Diagnostic.About).
func (c *checker) typeErrorf(at ast.Pos, about map[string]string, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Pos: at, Msg: fmt.Sprintf(format, args...), About: about})
}

func (c *checker) run() *ir.Schema {
	var flags []string
	for _, u := range c.file.Uses {
		if !c.uses[u.Flag] {
			c.uses[u.Flag] = true
			flags = append(flags, u.Flag)
		}
	}
	caveats := c.caveatList()
	defs := c.definitionList()
	c.typePos = map[*ir.Relation][]*ast.TypeRef{}
	irDefs := make([]*ir.Definition, len(defs))
	for i, d := range defs {
		irDefs[i] = c.buildDefinition(d)
	}
	// This first schema only indexes names for the checks below; type lists and
	// rewrites are filled in afterwards.
	c.schema = ir.NewSchema(irDefs, caveats, flags)
	for i, d := range defs {
		c.resolveRelations(d, irDefs[i])
	}
	for i, d := range defs {
		c.resolvePermissions(d, irDefs[i])
	}
	c.checkAliasCycles(defs)
	if len(c.diags) > 0 || c.stop.Err() != nil {
		return nil
	}
	// Every name is known to exist now: build again to resolve the references.
	return ir.NewSchema(irDefs, caveats, flags)
}

// definitionList validates definition names and drops repeated ones.
func (c *checker) definitionList() []*ast.Definition {
	c.defs = map[string]*ast.Definition{}
	var out []*ast.Definition
	for _, d := range c.file.Definitions {
		if len(d.Name) > maxDefinitionName || !definitionName.MatchString(d.Name) {
			c.errorf(d.NamePos, "invalid definition name `%s`: each part must be 3 to 64 characters of lowercase letters, digits and underscores, start with a letter and not end with an underscore (a prefix is written `prefix/name`)", d.Name)
		}
		if first, dup := c.defs[d.Name]; dup {
			c.errorf(d.NamePos, "duplicate definition `%s` (first defined at %d:%d)", d.Name, first.NamePos.Line, first.NamePos.Col)
			continue
		}
		c.defs[d.Name] = d
		out = append(out, d)
	}
	return out
}

// buildDefinition makes the IR definition with its members' names, docs and allowed
// types; permission rewrites are filled in by checkDefinition once every definition
// exists.
func (c *checker) buildDefinition(d *ast.Definition) *ir.Definition {
	out := &ir.Definition{Name: d.Name, Doc: d.Doc, Pos: ir.Pos(d.Pos)}
	seen := map[string]*ast.Relation{}
	for _, r := range d.Relations {
		if !relationName.MatchString(r.Name) {
			c.errorf(r.NamePos, "invalid %s name `%s` in definition `%s`: must be 3 to 64 characters of lowercase letters, digits and underscores, start with a letter and not end with an underscore", kind(r), r.Name, d.Name)
		}
		if first, dup := seen[r.Name]; dup {
			c.typeErrorf(r.NamePos, map[string]string{"definition_name": d.Name, "relation_or_permission_name": r.Name}, "duplicate relation/permission name `%s` under definition `%s` (first defined at %d:%d)", r.Name, d.Name, first.NamePos.Line, first.NamePos.Col)
			continue
		}
		seen[r.Name] = r
		rel := &ir.Relation{Name: r.Name, Doc: r.Doc, Pos: ir.Pos(r.Pos)}
		if r.IsPermission {
			// A placeholder, so IsPermission holds while expressions are checked.
			rel.Rewrite = &ir.Expr{Kind: ir.Nil, Pos: ir.Pos(r.Pos)}
		}
		out.Relations = append(out.Relations, rel)
	}
	return out
}

func kind(r *ast.Relation) string {
	if r.IsPermission {
		return "permission"
	}
	return "relation"
}

// members pairs each member of d that made it into the IR with its syntax.
func members(d *ast.Definition, out *ir.Definition) func(yield func(*ast.Relation, *ir.Relation) bool) {
	return func(yield func(*ast.Relation, *ir.Relation) bool) {
		for _, r := range d.Relations {
			target := out.Relation(r.Name)
			if target == nil || target.Pos != ir.Pos(r.Pos) {
				continue // a duplicate, already reported
			}
			if !yield(r, target) {
				return
			}
		}
	}
}

// resolveRelations fills in every relation's allowed subject types.
func (c *checker) resolveRelations(d *ast.Definition, out *ir.Definition) {
	for r, target := range members(d, out) {
		if !r.IsPermission {
			target.Allowed = c.allowedTypes(d, r)
			c.typePos[target] = r.Types
		}
	}
}

// resolvePermissions compiles every permission's expression, and checks what needs
// every relation's types: wildcards reached through subject relations.
func (c *checker) resolvePermissions(d *ast.Definition, out *ir.Definition) {
	for r, target := range members(d, out) {
		if r.IsPermission {
			c.checkAnnotations(d, r)
			target.Rewrite = c.expr(d, out, r, r.Expr)
			c.checkNesting(r, target.Rewrite)
			continue
		}
		c.checkTransitiveWildcards(d, target)
	}
}
