package materialize

import (
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// relKey names a relation by its definition and its name, which stay the same across
// compilations of a schema, unlike its pointer and its id.
type relKey struct{ def, rel string }

// plan is what a schema says the index holds: its recursive relations (Leopard's
// nested groups) and its chains. A relation is recursive when it lies on a cycle of
// the graph in which relation R points at relation R' when R admits the subject set
// `T#R'` (`group { relation member: user | group#member }`); permissions are not in
// the graph, so a cycle through one is evaluated, not indexed. A chain is a relation
// of objects of its own type that a permission of the type follows back into itself
// (`folder { relation parent: folder; permission view = viewer + parent->view }`):
// the index holds `folder:f#parent@folder:p` as the set edge from folder:f#parent to
// folder:p#parent, so that the sets nested in folder:f#parent are f's ancestors.
type plan struct {
	rels   map[relKey]bool
	chains map[relKey]bool
	// sig is the plan written out: the indexed relations and their type lists. Two
	// schemas with equal signatures index the same relationships the same way, so a
	// schema change that keeps it is not a breaking one.
	sig string
}

// planFor returns s's plan (an empty one for a nil schema).
func planFor(s *ir.Schema) *plan {
	p := &plan{rels: map[relKey]bool{}, chains: map[relKey]bool{}}
	if s == nil {
		return p
	}
	for _, r := range recursiveRelations(s) {
		p.rels[relKey{r.Def.Name, r.Name}] = true
	}
	for _, r := range s.Relations {
		if isChain(s, r) {
			p.chains[relKey{r.Def.Name, r.Name}] = true
		}
	}
	keys := make([]string, 0, len(p.rels)+len(p.chains))
	for _, r := range s.Relations {
		k := relKey{r.Def.Name, r.Name}
		if !p.rels[k] && !p.chains[k] {
			continue
		}
		var b strings.Builder
		b.WriteString(r.Def.Name + "#" + r.Name + ":")
		if p.chains[k] {
			b.WriteString(" chain")
		}
		for _, a := range r.Allowed {
			b.WriteString(" " + a.SubjectType.String())
		}
		keys = append(keys, b.String())
	}
	slices.Sort(keys)
	p.sig = strings.Join(keys, "\n")
	return p
}

// empty reports whether the plan indexes nothing.
func (p *plan) empty() bool { return len(p.rels) == 0 && len(p.chains) == 0 }

// indexes reports whether relation rel of definition def is indexed as nested sets,
// whose members a subject's view answers.
func (p *plan) indexes(def, relation string) bool { return p.rels[relKey{def, relation}] }

// holds reports whether the index holds relation rel of definition def: nested sets
// or a chain.
func (p *plan) holds(def, relation string) bool {
	k := relKey{def, relation}
	return p.rels[k] || p.chains[k]
}

// isChain reports whether relation r of schema s is one the index holds as a chain:
// the tupleset of a permission's chain arrow (ir.Relation.ChainArrow) that no relation
// admits as a subject set (whose members, objects, the chain's sets do not hold).
func isChain(s *ir.Schema, r *ir.Relation) bool {
	if slices.ContainsFunc(s.Relations, func(o *ir.Relation) bool {
		return slices.ContainsFunc(o.Allowed, func(a ir.AllowedSubject) bool { return a.Rel == r })
	}) {
		return false
	}
	for _, p := range r.Def.Relations {
		if x := p.ChainArrow(); x != nil && x.TuplesetRel == r {
			return true
		}
	}
	return false
}

// recursiveRelations returns the relations on a cycle of subject-set references
// (Tarjan's strongly connected components: those of more than one relation, or of one
// that refers to itself).
func recursiveRelations(s *ir.Schema) []*ir.Relation {
	n := len(s.Relations)
	index, low := make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	var out []*ir.Relation
	next := 0
	succ := func(r *ir.Relation) []int32 {
		var ids []int32
		for _, a := range r.Allowed {
			if a.Rel != nil && !a.Rel.IsPermission() {
				ids = append(ids, a.Rel.ID)
			}
		}
		return ids
	}
	var visit func(v int32)
	visit = func(v int32) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		self := false
		for _, w := range succ(s.Relations[v]) {
			switch {
			case w == v:
				self = true
			case index[w] < 0:
				visit(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		i := len(stack) - 1
		for stack[i] != v {
			i--
		}
		comp := stack[i:]
		stack = stack[:i]
		for _, w := range comp {
			onStack[w] = false
		}
		if len(comp) > 1 || self {
			for _, w := range comp {
				out = append(out, s.Relations[w])
			}
		}
	}
	for v, r := range s.Relations {
		if !r.IsPermission() && index[v] < 0 {
			visit(int32(v))
		}
	}
	return out
}

// class is how the index takes one relationship of an indexed relation.
type class uint8

const (
	// absent: no relationship.
	absent class = iota
	// member: an unconditional relationship to an object or a wildcard, or to a
	// subject set the index holds (a set edge): indexed.
	member
	// expiring: an expiring relationship without a caveat. The set it starts from (and
	// every set above it) answers "yes" through its unconditional paths only.
	expiring
	// conditional: a caveated relationship, or one to a subject set of a relation the
	// index does not hold. The sets above it are evaluated.
	conditional
)

// classify returns how the index takes x (a relationship of a relation it holds) and
// whether its subject is a set the index holds. A chain's subject is the set of the
// chain on the subject object (subjectName), when it is an object of the chain's type.
func (p *plan) classify(x *rel.Relationship) (c class, set bool) {
	if p.chains[relKey{x.Resource.Type, x.Relation}] {
		if x.Subject.Relation != "" || x.Subject.Object.Type != x.Resource.Type {
			return conditional, false
		}
		set = true
	} else {
		set = x.Subject.Relation != "" && p.indexes(x.Subject.Object.Type, x.Subject.Relation)
	}
	switch {
	case x.Caveat != nil || (x.Subject.Relation != "" && !set):
		return conditional, set
	case x.Expiration != nil:
		return expiring, set
	}
	return member, set
}

// subjectName appends the name the index gives x's subject to b: a chain's subject,
// an object of the chain's type, stands for the chain's set on it.
func (p *plan) subjectName(b []byte, x *rel.Relationship) []byte {
	if x.Subject.Relation == "" && x.Subject.Object.Type == x.Resource.Type && p.chains[relKey{x.Resource.Type, x.Relation}] {
		return setName(b, x.Subject.Object.Type, x.Subject.Object.ID, x.Relation)
	}
	return setName(b, x.Subject.Object.Type, x.Subject.Object.ID, x.Subject.Relation)
}

// setName appends the name of set or subject type:id#relation ("type:id" when relation
// is empty) to b.
func setName(b []byte, typ, id, relation string) []byte {
	b = append(append(append(b, typ...), ':'), id...)
	if relation != "" {
		b = append(append(b, '#'), relation...)
	}
	return b
}
