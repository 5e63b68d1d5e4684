package check

import (
	"sort"
	"strings"

	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// checkAliasCycles refuses permissions that only alias each other in a loop
// (`permission a = b` with `permission b = a`, or `permission a = a`): they can never
// reach a relationship, and SpiceDB refuses them ("there exists a cycle in
// permissions"). Any other recursion — through an arrow or an operator — is legal.
// As in SpiceDB, the reported set also holds aliases that lead into the loop.
func (c *checker) checkAliasCycles(defs []*ast.Definition) {
	for _, d := range defs {
		out := c.schema.Definition(d.Name)
		if out == nil || out.Pos != ir.Pos(d.Pos) {
			continue
		}
		stuck := unresolvedAliases(out)
		if len(stuck) == 0 {
			continue
		}
		sort.Strings(stuck)
		at := out.Relation(stuck[0]).Pos
		for _, name := range stuck {
			if p := out.Relation(name).Pos; p.Line < at.Line || p.Line == at.Line && p.Col < at.Col {
				at = p
			}
		}
		c.typeErrorf(ast.Pos(at), map[string]string{"definition_name": d.Name}, "under definition `%s`, there exists a cycle in permissions: %s", d.Name, strings.Join(stuck, ", "))
	}
}

// unresolvedAliases returns the alias permissions that never resolve to a relation or
// to a permission that is more than an alias.
func unresolvedAliases(d *ir.Definition) []string {
	aliasOf := map[string]string{}
	for _, r := range d.Relations {
		if r.IsPermission() && r.Rewrite.Kind == ir.Ref {
			if t := d.Relation(r.Rewrite.Name); t != nil && t.IsPermission() {
				aliasOf[r.Name] = r.Rewrite.Name
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for name, target := range aliasOf {
			if _, pending := aliasOf[target]; !pending {
				delete(aliasOf, name)
				changed = true
			}
		}
	}
	out := make([]string, 0, len(aliasOf))
	for name := range aliasOf {
		out = append(out, name)
	}
	return out
}
