// Package ir owns the compiled, immutable schema that both schema languages compile to
// and that the engine evaluates: definitions and their relations and permissions with
// numeric ids, permission rewrite trees with numbered nodes, every reference resolved
// to what it names, and caveats with their compiled expressions. It depends on no
// other schema package: the syntax tree and the compiler sit beside and above it.
// An *ir.Schema is never modified after compilation and is safe to share.
package ir

import (
	"fmt"

	"github.com/latch-authz/latch/internal/caveat"
)

// Pos is a 1-based line and column in schema source. The syntax tree has its own
// position type: the compiled schema, and the engine above it, do not depend on the
// parsers' tree, and the checker converts one to the other.
type Pos struct{ Line, Col int }

// Schema is a compiled schema. Every definition, relation and rewrite node has a
// dense id, and every reference between them is resolved to a pointer, so that
// evaluation can index flat per-request state by id instead of looking names up;
// the names stay beside them for messages, reflection and the wire.
type Schema struct {
	// Definitions in declaration order; Definition.ID indexes this slice.
	Definitions []*Definition
	// Relations holds every relation and permission of every definition, definition
	// by definition in declaration order; Relation.ID indexes this slice.
	Relations []*Relation
	// Exprs holds every node of every permission's rewrite tree; Expr.ID indexes it.
	Exprs []*Expr
	// Caveats in declaration order; Caveat.ID indexes this slice.
	Caveats []*Caveat
	// UseFlags are the `use` flags the schema enables (e.g. "expiration").
	UseFlags []string

	defs    map[string]*Definition
	caveats map[string]*Caveat
}

// NewSchema builds a Schema from its parts: it assigns ids from declaration order,
// indexes names, and resolves every reference (rewrite references, arrow tuplesets
// and targets, allowed subject types and subject relations) to what it names.
// The checker builds the schema twice: once, before permissions are compiled, to
// look names up while checking, and again once every part is checked. A reference
// that names nothing panics: the checker reports those as diagnostics instead of
// building, so one reaching here is a compiler bug.
func NewSchema(defs []*Definition, caveats []*Caveat, useFlags []string) *Schema {
	s := &Schema{
		Definitions: defs, Caveats: caveats, UseFlags: useFlags,
		defs: make(map[string]*Definition, len(defs)), caveats: make(map[string]*Caveat, len(caveats)),
	}
	for i, d := range defs {
		d.ID = int32(i)
		d.rels = make(map[string]*Relation, len(d.Relations))
		for _, r := range d.Relations {
			r.ID = int32(len(s.Relations))
			r.Def = d
			d.rels[r.Name] = r
			s.Relations = append(s.Relations, r)
		}
		s.defs[d.Name] = d
	}
	for i, c := range caveats {
		c.ID = int32(i)
		s.caveats[c.Name] = c
	}
	targets := map[string][]*Relation{}
	for _, r := range s.Relations {
		s.resolveAllowed(r)
		if r.Rewrite != nil {
			s.resolveExpr(r, r.Rewrite, targets)
		}
	}
	return s
}

// resolveAllowed points each entry of r's type list at its definition and subject
// relation.
func (s *Schema) resolveAllowed(r *Relation) {
	for i := range r.Allowed {
		a := &r.Allowed[i]
		a.Def = s.defs[a.Type]
		if a.Def == nil {
			panic(fmt.Sprintf("ir: relation %s#%s allows unknown type %q", r.Def.Name, r.Name, a.Type))
		}
		a.Rel = nil
		if a.Relation != "" {
			a.Rel = a.Def.rels[a.Relation]
			if a.Rel == nil {
				panic(fmt.Sprintf("ir: relation %s#%s allows unknown subject relation %s#%s", r.Def.Name, r.Name, a.Type, a.Relation))
			}
		}
	}
}

// resolveExpr numbers x and its children depth first and resolves their names in
// perm's definition. targets shares one table per arrow target name between arrows.
func (s *Schema) resolveExpr(perm *Relation, x *Expr, targets map[string][]*Relation) {
	x.ID = int32(len(s.Exprs))
	s.Exprs = append(s.Exprs, x)
	d := perm.Def
	switch x.Kind {
	case Ref:
		x.Rel = d.rels[x.Name]
		if x.Rel == nil {
			panic(fmt.Sprintf("ir: permission %s#%s refers to unknown relation %q", d.Name, perm.Name, x.Name))
		}
	case Arrow:
		x.TuplesetRel = d.rels[x.Tupleset]
		if x.TuplesetRel == nil {
			panic(fmt.Sprintf("ir: permission %s#%s walks unknown relation %q", d.Name, perm.Name, x.Tupleset))
		}
		x.targets = targets[x.Target]
		if x.targets == nil {
			x.targets = s.relationsNamed(x.Target)
			targets[x.Target] = x.targets
		}
	}
	for _, c := range x.Children {
		s.resolveExpr(perm, c, targets)
	}
}

// relationsNamed returns, indexed by Definition.ID, each definition's member named
// name, or nil where it has none.
func (s *Schema) relationsNamed(name string) []*Relation {
	out := make([]*Relation, len(s.Definitions))
	for i, d := range s.Definitions {
		out[i] = d.rels[name]
	}
	return out
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
	ID   int32
	Name string // full name including any prefix: "tenant/document"
	Doc  string // doc comment text, verbatim including the comment markers, or ""
	Pos  Pos
	// Relations holds relations and permissions in declaration order. Their ids are
	// consecutive: Relations[i].ID is Relations[0].ID + i.
	Relations []*Relation

	rels map[string]*Relation
}

// Relation returns the relation or permission named name, or nil.
func (d *Definition) Relation(name string) *Relation { return d.rels[name] }

// Relation is a relation (stored relationships) or a permission (a rewrite).
type Relation struct {
	// ID is dense across the schema (Schema.Relations[ID] is this relation), so
	// per-request state can be a slice indexed by it.
	ID   int32
	Name string
	Doc  string
	Pos  Pos
	Def  *Definition

	// Allowed lists the subject types a relation accepts; nil for a permission.
	Allowed []AllowedSubject
	// Rewrite is a permission's expression; nil for a relation.
	Rewrite *Expr
	// ReachedFrom lists, for a permission of an OpenFGA model, the users from which
	// OpenFGA's graph of the model has a path to it: types ("user"), their wildcards
	// ("user:*") and subject sets ("group#member"); OpenFGA answers no for any other
	// without evaluating it. nil when not known (SpiceDB and Permify schemas).
	ReachedFrom []string
}

// IsPermission reports whether r is a permission.
func (r *Relation) IsPermission() bool { return r.Rewrite != nil }

// WildcardsOnly reports whether r is a relation whose subjects are all wildcards
// (`relation public: user:*`): whether an object subject has it depends on the
// subject's type, never on its id.
func (r *Relation) WildcardsOnly() bool {
	if r.IsPermission() || len(r.Allowed) == 0 {
		return false
	}
	for _, a := range r.Allowed {
		if !a.Wildcard {
			return false
		}
	}
	return true
}

// ChainArrow returns the arrow by which permission r follows a chain of objects of
// its own type back into itself (on folder, `permission view = viewer + parent->view`
// with `relation parent: folder`): an operand `t->r` of r's rewrite, a union, whose
// tupleset t is a relation admitting only objects of r's type. Such an r holds on an
// object exactly when its other operands hold on the object or on an object the chain
// reaches from it. Nil when r has no such arrow, or more than one.
func (r *Relation) ChainArrow() *Expr {
	x := r.Rewrite
	if x == nil || x.Kind != Union {
		return nil
	}
	var found *Expr
	for _, c := range x.Children {
		if c.Kind != Arrow || c.ArrowKind != ArrowAny || c.TargetOn(r.Def) != r || !c.TuplesetRel.objectsOf(r.Def) {
			continue
		}
		if found != nil {
			return nil
		}
		found = c
	}
	return found
}

// objectsOf reports whether r is a relation admitting only objects of d (no subject
// sets, no wildcards).
func (r *Relation) objectsOf(d *Definition) bool {
	if r == nil || r.IsPermission() || len(r.Allowed) == 0 {
		return false
	}
	for _, a := range r.Allowed {
		if a.Def != d || a.Relation != "" || a.Wildcard {
			return false
		}
	}
	return true
}

// AllowedSubject is one entry of a relation's type list: `user`, `group#member`,
// `user:*`, optionally `with caveat`, `with expiration` or both, with the names
// resolved.
type AllowedSubject struct {
	// Entries are not comparable: their pointers differ between two compilations of
	// the same text, so compare SubjectType, which does not. (First, because a
	// zero-size last field would be padded.)
	_ [0]func()

	SubjectType
	// Def is the subject's definition (Type).
	Def *Definition
	// Rel is a subject set's relation (Relation); nil for the object itself and for
	// a wildcard.
	Rel *Relation
	// FromSubject lists the subject types for which OpenFGA resolves this subject set
	// from the subject's side (its weight-two strategy, or its recursive one for a
	// relation's subject set of itself); set for OpenFGA models only.
	FromSubject []string
}

// SubjectType is a type-list entry by name, as written. Equal values mean the same
// entry in any two schemas.
type SubjectType struct {
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
	// ID is dense across the schema (Schema.Exprs[ID] is this node); a tree's nodes
	// are numbered depth first, parent before children.
	ID       int32
	Kind     ExprKind
	Pos      Pos
	Children []*Expr // Union, Intersection (two or more), Exclusion (two)

	Name string    // Ref: the relation or permission name
	Rel  *Relation // Ref: the relation or permission Name resolves to

	Tupleset    string    // Arrow: the relation whose subjects are walked
	TuplesetRel *Relation // Arrow: the relation Tupleset resolves to
	Target      string    // Arrow: the relation or permission evaluated on each subject
	ArrowKind   ArrowKind // Arrow
	// AnySpelled: the arrow was written `rel.any(perm)`, which SpiceDB prints back in
	// that form rather than as `rel->perm`.
	AnySpelled bool
	// FromSubject (Arrow) lists the subject types for which OpenFGA resolves the arrow
	// from the subject's side (its weight-two strategy, or its recursive one for an
	// arrow to its own relation); set for OpenFGA models only.
	FromSubject []string

	// targets resolves Target on every definition, indexed by Definition.ID; arrows
	// with the same Target share it.
	targets []*Relation
}

// TargetOn returns the member an arrow evaluates (its Target) on subjects of
// definition d, a definition of the same schema, or nil when d is nil or has no such
// member: SpiceDB skips those subjects.
func (x *Expr) TargetOn(d *Definition) *Relation {
	if d == nil {
		return nil
	}
	return x.targets[d.ID]
}

// Caveat is a named CEL condition with typed parameters.
type Caveat struct {
	ID         int32
	Name       string
	Doc        string
	Pos        Pos
	Params     []caveat.Param // in declaration order
	Expression string         // CEL source as written
	Compiled   *caveat.Compiled
}
