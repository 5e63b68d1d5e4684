package check

import (
	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// allowedTypes resolves a relation's type list.
func (c *checker) allowedTypes(d *ast.Definition, r *ast.Relation) []ir.AllowedSubject {
	if len(r.Types) == 0 {
		c.errorf(r.NamePos, "relation `%s` under definition `%s` must allow at least one subject type", r.Name, d.Name)
		return nil
	}
	var out []ir.AllowedSubject
	seen := map[string]bool{}
	for _, t := range r.Types {
		a, ok := c.allowedType(d, r, t)
		if !ok {
			continue
		}
		src := a.String()
		if seen[src] {
			c.typeErrorf(t.Pos, map[string]string{"definition_name": d.Name, "relation_name": r.Name, "allowed_relation": src}, "duplicate subject type `%s` on relation `%s` under definition `%s`", src, r.Name, d.Name)
			continue
		}
		seen[src] = true
		out = append(out, a)
	}
	return out
}

// allowedType resolves one entry of a type list; ok is false when it names something
// that does not exist.
func (c *checker) allowedType(d *ast.Definition, r *ast.Relation, t *ast.TypeRef) (ir.AllowedSubject, bool) {
	a := ir.AllowedSubject{SubjectType: ir.SubjectType{Type: t.Type, Relation: t.Relation, Wildcard: t.Wildcard, Caveat: t.Caveat, Expiration: t.Expiration}}
	if a.Relation == "..." {
		a.Relation = ""
	}
	ok := c.resolveSubjectType(d, r, t, a.SubjectType)
	if t.Expiration && !c.uses["expiration"] {
		if t.Caveat == "" && c.caveats["expiration"] != nil {
			// Without the flag, SpiceDB reads `with expiration` as a caveat reference.
			a.Caveat, a.Expiration = "expiration", false
			return a, ok
		}
		c.typeErrorf(t.ExpirationPos, map[string]string{"caveat_name": "expiration"}, "`with expiration` on relation `%s` requires `use expiration` at the top of the schema", r.Name)
		ok = false
	}
	if t.Caveat != "" && c.caveats[t.Caveat] == nil {
		c.typeErrorf(t.CaveatPos, map[string]string{"caveat_name": t.Caveat}, "caveat `%s` not found (used by relation `%s` under definition `%s`)", t.Caveat, r.Name, d.Name)
		ok = false
	}
	return a, ok
}

// resolveSubjectType checks that a subject type, and its subject relation, exist.
func (c *checker) resolveSubjectType(d *ast.Definition, r *ast.Relation, t *ast.TypeRef, a ir.SubjectType) bool {
	target := c.defs[a.Type]
	if target == nil {
		c.typeErrorf(t.Pos, map[string]string{"definition_name": a.Type}, "definition `%s` not found (used by %s `%s` under definition `%s`)", a.Type, kind(r), r.Name, d.Name)
		return false
	}
	if a.Relation != "" && !hasMember(target, a.Relation) {
		c.typeErrorf(t.Pos, map[string]string{"definition_name": a.Type, "relation_or_permission_name": a.Relation}, "relation/permission `%s` not found under definition `%s` (used by %s `%s` under definition `%s`)", a.Relation, a.Type, kind(r), r.Name, d.Name)
		return false
	}
	return true
}

func hasMember(d *ast.Definition, name string) bool {
	for _, r := range d.Relations {
		if r.Name == name {
			return true
		}
	}
	return false
}

// checkAnnotations checks a permission's type annotation. SpiceDB ignores one unless
// the schema says `use typechecking`.
func (c *checker) checkAnnotations(d *ast.Definition, r *ast.Relation) {
	if !c.uses["typechecking"] {
		return
	}
	for _, t := range r.Types {
		a := ir.SubjectType{Type: t.Type, Relation: t.Relation}
		if a.Relation == "..." {
			a.Relation = ""
		}
		c.resolveSubjectType(d, r, t, a)
	}
}

// wildcardRef says where a relation reaches a wildcard: Via is the relation whose
// type list holds `Type:*`.
type wildcardRef struct {
	Type string
	Via  string // "definition#relation"
}

// wildcardVia reports whether relation rel of definition def admits a wildcard
// subject, directly or through subject relations (`group#member`), as SpiceDB's
// type system computes it: permissions have no type list, so they stop the search.
//
// SpiceDB 1.56 remembers each answer, at every step of the search, by the relation's
// name alone, for the rest of the schema: once any definition's `member` was found
// free of wildcards, every later question about a `member` gets that answer. So do
// these checks, asked in the order SpiceDB asks them across definitions (the schema's
// order; within one definition SpiceDB's order varies from run to run, and this is
// the text's), so that a schema SpiceDB accepts is accepted here. Only "no wildcard"
// is remembered: SpiceDB stops at the first wildcard it reports, and remembering one
// would report others it never reaches.
func (c *checker) wildcardVia(def, rel string, seen map[string]bool) *wildcardRef {
	if c.noWildcard[rel] {
		return nil
	}
	w := c.searchWildcard(def, rel, seen)
	if w == nil {
		c.noWildcard[rel] = true
	}
	return w
}

func (c *checker) searchWildcard(def, rel string, seen map[string]bool) *wildcardRef {
	key := def + "#" + rel
	if seen[key] {
		return nil
	}
	seen[key] = true
	d := c.schema.Definition(def)
	if d == nil {
		return nil
	}
	r := d.Relation(rel)
	if r == nil {
		return nil
	}
	for _, a := range r.Allowed {
		if a.Wildcard {
			return &wildcardRef{Type: a.Type, Via: key}
		}
		if a.Relation != "" {
			if w := c.wildcardVia(a.Type, a.Relation, seen); w != nil {
				return w
			}
		}
	}
	return nil
}

// checkTransitiveWildcards refuses a subject relation of another definition that
// reaches a wildcard: SpiceDB refuses `relation viewer: group#member` when
// group#member (or anything it includes) allows `user:*`. Like SpiceDB, it does not
// look through subject relations of the relation's own definition.
func (c *checker) checkTransitiveWildcards(d *ast.Definition, rel *ir.Relation) {
	refs := c.typePos[rel]
	for _, a := range rel.Allowed {
		if a.Relation == "" || a.Wildcard || a.Type == d.Name {
			continue
		}
		w := c.wildcardVia(a.Type, a.Relation, map[string]bool{})
		if w == nil {
			continue
		}
		c.typeErrorf(refPos(refs, a), map[string]string{"definition_name": d.Name, "relation_name": rel.Name}, "relation `%s` under definition `%s` allows `%s#%s`, which includes wildcard type `%s:*` via relation `%s`: wildcard relations cannot be transitively included", rel.Name, d.Name, a.Type, a.Relation, w.Type, w.Via)
	}
}

// refPos finds where an allowed subject type was written.
func refPos(refs []*ast.TypeRef, a ir.AllowedSubject) ast.Pos {
	for _, t := range refs {
		if t.Type == a.Type && (t.Relation == a.Relation || t.Relation == "..." && a.Relation == "") && t.Wildcard == a.Wildcard {
			return t.Pos
		}
	}
	if len(refs) > 0 {
		return refs[0].Pos
	}
	return ast.Pos{}
}
