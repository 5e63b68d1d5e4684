// Package ir owns the compiled, immutable schema that both schema languages compile to
// and that the engine evaluates: definitions and their relations and permissions with
// numeric ids, permission rewrite trees, and caveats with their compiled expressions.
// An *ir.Schema is never modified after compilation and is safe to share.
package ir

import "github.com/latch-authz/latch/internal/caveat"

// Pos is a 1-based line and column in schema source.
type Pos struct{ Line, Col int }

// Schema is a compiled schema.
type Schema struct {
	// Definitions in declaration order; Definition.ID indexes this slice.
	Definitions []*Definition
	// Caveats in declaration order; Caveat.ID indexes this slice.
	Caveats []*Caveat
	// UseFlags are the `use` flags the schema enables (e.g. "expiration").
	UseFlags []string

	defs    map[string]*Definition
	caveats map[string]*Caveat
}

// NewSchema builds a Schema from its parts and indexes them by name. The compiler calls
// it once the parts are checked; IDs are assigned here from slice positions.
func NewSchema(defs []*Definition, caveats []*Caveat, useFlags []string) *Schema {
	s := &Schema{
		Definitions: defs, Caveats: caveats, UseFlags: useFlags,
		defs: make(map[string]*Definition, len(defs)), caveats: make(map[string]*Caveat, len(caveats)),
	}
	for i, d := range defs {
		d.ID = i
		d.rels = make(map[string]*Relation, len(d.Relations))
		for j, r := range d.Relations {
			r.ID = j
			r.Def = d
			d.rels[r.Name] = r
		}
		s.defs[d.Name] = d
	}
	for i, c := range caveats {
		c.ID = i
		s.caveats[c.Name] = c
	}
	return s
}

// Definition returns the definition named name, or nil.
func (s *Schema) Definition(name string) *Definition { return s.defs[name] }

// Caveat returns the caveat named name, or nil.
func (s *Schema) Caveat(name string) *Caveat { return s.caveats[name] }

// Uses reports whether the schema enables `use flag`.
func (s *Schema) Uses(flag string) bool {
	for _, f := range s.UseFlags {
		if f == flag {
			return true
		}
	}
	return false
}

// Definition is an object type.
type Definition struct {
	ID   int
	Name string // full name including any prefix: "tenant/document"
	Doc  string // doc comment text, verbatim including the comment markers, or ""
	Pos  Pos
	// Relations holds relations and permissions in declaration order; Relation.ID indexes it.
	Relations []*Relation

	rels map[string]*Relation
}

// Relation returns the relation or permission named name, or nil.
func (d *Definition) Relation(name string) *Relation { return d.rels[name] }

// Relation is a relation (stored relationships) or a permission (a rewrite).
type Relation struct {
	ID   int
	Name string
	Doc  string
	Pos  Pos
	Def  *Definition

	// Allowed lists the subject types a relation accepts; nil for a permission.
	Allowed []AllowedSubject
	// Rewrite is a permission's expression; nil for a relation.
	Rewrite *Expr
}

// IsPermission reports whether r is a permission.
func (r *Relation) IsPermission() bool { return r.Rewrite != nil }

// AllowedSubject is one entry of a relation's type list: `user`, `group#member`,
// `user:*`, optionally `with caveat`, `with expiration` or both.
type AllowedSubject struct {
	Type       string
	Relation   string // "" for the object itself (SpiceDB's ellipsis)
	Wildcard   bool   // `type:*`
	Caveat     string // "" when not caveated
	Expiration bool   // `with expiration`
}

// ExprKind is the kind of a rewrite expression node.
type ExprKind int

const (
	// Union: any child grants (`+`, `or`).
	Union ExprKind = iota + 1
	// Intersection: every child grants (`&`, `and`).
	Intersection
	// Exclusion: the first child grants and the second does not (`-`, `not`). Exactly two children.
	Exclusion
	// Ref: a relation or permission of the same definition, by name.
	Ref
	// Arrow: for each subject of Tupleset, Target on that subject (`rel->perm`,
	// `rel.any(perm)`, `rel.all(perm)`, Permify's `rel.perm`).
	Arrow
	// Nil: the empty set.
	Nil
)

// ArrowKind distinguishes `->`/`.any()` from `.all()`.
type ArrowKind int

const (
	// ArrowAny grants when Target holds on any subject of the tupleset.
	ArrowAny ArrowKind = iota
	// ArrowAll grants when Target holds on every subject of the tupleset (and there is one).
	ArrowAll
)

// Expr is a node of a permission's rewrite tree.
type Expr struct {
	Kind     ExprKind
	Pos      Pos
	Children []*Expr // Union, Intersection (two or more), Exclusion (two)

	Name string // Ref: the relation or permission name

	Tupleset   string    // Arrow: the relation whose subjects are walked
	Target     string    // Arrow: the relation or permission evaluated on each subject
	ArrowKind  ArrowKind // Arrow
	AnySpelled bool      // Arrow: written `rel.any(perm)`, which SpiceDB prints back so
}

// Caveat is a named CEL condition with typed parameters.
type Caveat struct {
	ID         int
	Name       string
	Doc        string
	Pos        Pos
	Params     []caveat.Param // in declaration order
	Expression string         // CEL source as written
	Compiled   *caveat.Compiled
}
