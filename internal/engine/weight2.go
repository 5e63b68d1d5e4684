package engine

import (
	"context"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// OpenFGA (v1.22) resolves a subject set `[T#s]` or an arrow `s from y` whose s holds
// the checked object subject through its own tuples only (its "weight two" strategy,
// which its planner picks for these over its default almost always) by reading from
// the subject's side: every tuple of T#s naming the subject or its type's wildcard,
// whatever its object, intersected with the subject sets or parents of the checked
// object. A condition that fails to evaluate (a parameter missing) on one of those
// tuples is then an error only if no other tuple of the same read holds, whether or
// not the failing tuple's object was one the check needed: with an object of the
// checked object's subject sets granting, the check is allowed; else, with another
// tuple of T#s holding the subject, it is denied; else the failing condition is the
// error. A relation's subject set of itself (`[user, group#member]` on
// group#member) is read the same way and then walked breadth first from the object
// (its recursive strategy); other subject sets on a cycle of the model are resolved
// by OpenFGA's default strategy, where only the subject sets' own tuples count.
//
// Not modelled: OpenFGA evaluates one tuple per object of such a read, the first its
// store yields (a contextual tuple before a stored one, and for its memory store the
// first written), where the engine evaluates every tuple of the read.
//
// The evaluator applies this where OpenFGA does, as internal/fga marks it from
// OpenFGA's weighted graph of the model (ir.AllowedSubject.FromSubject,
// ir.Expr.FromSubject), for an object subject, when the subject set has no condition
// and its relation is, through computed relations, a relation of tuples or a union
// of such (what OpenFGA reads in one step). Of a union, each operand is a read of its
// own, and one that fails with none of its tuples holding fails the whole, whatever
// the others hold (OpenFGA's merge of the reads stops at the failure).

// subjectReads returns the relations of tuples OpenFGA reads from the subject's side
// for p (a member of another definition): p's own if it is one, through computed
// relations and unions (whose arrows it skips), and false when p is anything else
// (which OpenFGA reads otherwise). A relation that names no subject of the subject's
// type is not read, nor are subject sets: FromSubject marks only those whose subject
// sets never reach the subject's type.
func (ev *evaluator) subjectReads(p *ir.Relation) ([]*ir.Relation, bool) {
	var out []*ir.Relation
	ok := ev.appendReads(p, &out, len(ev.s.Relations))
	return out, ok
}

func (ev *evaluator) appendReads(p *ir.Relation, out *[]*ir.Relation, budget int) bool {
	if budget == 0 {
		return false
	}
	if !p.IsPermission() {
		for _, a := range p.Allowed {
			if a.Relation == "" && a.Type == ev.subject.Object.Type {
				if !slices.Contains(*out, p) {
					*out = append(*out, p)
				}
				break
			}
		}
		return true
	}
	for _, c := range unionOperands(p.Rewrite) {
		switch {
		case c.Kind == ir.Arrow:
			// OpenFGA reads nothing for it: it is not one step from the subject
			// (FromSubject says so), as weighed from the subject's type.
		case c.Kind != ir.Ref || !ev.appendReads(c.Rel, out, budget-1):
			return false
		}
	}
	return true
}

// weight2Userset returns the relations of tuples to read from the subject's side for
// the subject sets of allowed entry a of the relation being evaluated, or false when
// OpenFGA follows them by their own tuples.
func (ev *evaluator) weight2Userset(a ir.AllowedSubject) ([]*ir.Relation, bool) {
	if !ev.fga || ev.subject.Relation != "" || a.Caveat != "" || !slices.Contains(a.FromSubject, ev.subject.Object.Type) {
		return nil, false
	}
	return ev.subjectReads(a.Rel)
}

// weight2Arrow returns, by parent type, the relation of tuples to read from the
// subject's side for arrow x (a parent type whose target names no subject of the
// subject's type has none), or nil when OpenFGA follows the arrow's tuples (also when
// a target is a union: OpenFGA's answer then depends on which parent's read comes
// first).
func (ev *evaluator) weight2Arrow(x *ir.Expr) map[string]*ir.Relation {
	if !ev.fga || ev.subject.Relation != "" || x.ArrowKind != ir.ArrowAny || !slices.Contains(x.FromSubject, ev.subject.Object.Type) {
		return nil
	}
	out := map[string]*ir.Relation{}
	for _, a := range x.TuplesetRel.Allowed {
		if a.Caveat != "" {
			return nil // OpenFGA fails on the parent's condition first
		}
		target := x.TargetOn(a.Def)
		if target == nil {
			continue
		}
		reads, ok := ev.subjectReads(target)
		if !ok || len(reads) > 1 {
			return nil
		}
		if len(reads) == 1 {
			out[a.Type] = reads[0]
		}
	}
	return out
}

// subjectSide is what a read of a relation's tuples from the subject's side found:
// the objects whose tuples hold the subject and, when none does, a condition that
// failed to evaluate (no when none did).
type subjectSide struct {
	holds  map[string]bool
	failed outcome
}

// verdict is OpenFGA's answer for object id of a read's relation: granted when one of
// its tuples holds, else denied if any tuple of the read held, else the failure.
func (s *subjectSide) verdict(id string) outcome {
	switch {
	case s.holds[id]:
		return outHas
	case len(s.holds) > 0:
		return outNo
	}
	return s.failed
}

// union merges the reads of a union's operands: the objects any holds, and the
// failure of an operand none of whose tuples held, which fails the whole (no failure
// stands beside objects that hold).
func (ev *evaluator) union(ctx context.Context, reads []*ir.Relation) (*subjectSide, error) {
	if len(reads) == 1 {
		return ev.fromSubject(ctx, reads[0])
	}
	out := &subjectSide{holds: map[string]bool{}, failed: outNo}
	for _, s := range reads {
		side, err := ev.fromSubject(ctx, s)
		if err != nil {
			return nil, err
		}
		if len(side.holds) == 0 && side.failed.st != no {
			return side, nil
		}
		for id := range side.holds {
			out.holds[id] = true
		}
	}
	return out, nil
}

// fromSubject reads stored relation s from the subject's side, as OpenFGA does:
// every tuple naming the subject or its type's wildcard, whatever its object,
// remembered for the request.
func (ev *evaluator) fromSubject(ctx context.Context, s *ir.Relation) (*subjectSide, error) {
	if side, ok := ev.left[s]; ok {
		return side, nil
	}
	ids := []string{ev.subject.Object.ID}
	if ev.subject.Object.ID != rel.Wildcard {
		ids = append(ids, rel.Wildcard)
	}
	f := store.Filter{
		ResourceType: s.Def.Name, Relation: s.Name,
		Subject: &store.SubjectFilter{Type: ev.subject.Object.Type, IDs: ids, Relation: "", RelationSet: true},
	}
	side := &subjectSide{holds: map[string]bool{}, failed: outNo}
	for item, err := range ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		x := &item.Relationship
		ev.tr.read(x.Expiration)
		switch o := ev.caveat(x.Caveat); o.st {
		case has:
			side.holds[x.Resource.ID] = true
		case no:
		default:
			side.failed = or(side.failed, o)
		}
	}
	if ev.left == nil {
		ev.left = map[*ir.Relation]*subjectSide{}
	}
	ev.left[s] = side
	return side, nil
}

// arrowFromSubject answers an arrow OpenFGA resolves from the subject's side (reads,
// by parent type) over its tupleset relationships all: a resource is granted when
// one of its parents holds the subject, else denied, unless a parent type's read
// found no tuple holding and a condition failing, which is then the answer.
func (ev *evaluator) arrowFromSubject(ctx context.Context, all []edge, reads map[string]*ir.Relation) (results, error) {
	sides := make(map[string]*subjectSide, len(reads))
	failed := outNo
	for typ, s := range reads {
		side, err := ev.fromSubject(ctx, s)
		if err != nil {
			return nil, err
		}
		sides[typ] = side
		if len(side.holds) == 0 {
			failed = or(failed, side.failed)
		}
	}
	out := results{}
	for _, e := range all {
		o := failed
		if side := sides[e.typ]; side != nil && side.holds[e.target] {
			o = outHas
		}
		out.put(e.resource, or(out.get(e.resource), o))
	}
	return out, nil
}

// recursiveSet reports whether OpenFGA resolves a, a relation's subject set of itself
// (`[user, group#member]` on group#member), by its recursive strategy (internal/fga
// marked it for the subject's type), and what it then reads from the subject's side.
func (ev *evaluator) recursiveSet(a ir.AllowedSubject) ([]*ir.Relation, bool) {
	if !ev.fga || ev.subject.Relation != "" || a.Caveat != "" || !slices.Contains(a.FromSubject, ev.subject.Object.Type) {
		return nil, false
	}
	return ev.subjectReads(a.Rel)
}

// readsStored reports whether permission p reads stored relation r directly or in a
// union (p's relation is r's).
func readsStored(p, r *ir.Relation) bool {
	if p.Rewrite == nil {
		return false
	}
	return slices.ContainsFunc(unionOperands(p.Rewrite), func(c *ir.Expr) bool { return c.Kind == ir.Ref && c.Rel == r })
}

// unionOperands is x's operands when it is a union, else x alone.
func unionOperands(x *ir.Expr) []*ir.Expr {
	if x.Kind == ir.Union {
		return x.Children
	}
	return []*ir.Expr{x}
}

// object is an object of any type, as OpenFGA's recursive walk names them.
type object struct{ typ, id string }

// recursive returns, when OpenFGA resolves the subject sets of stored relation r by
// its recursive strategy, r's subject set entries (all of them: OpenFGA walks them
// together) and what it reads from the subject's side.
func (ev *evaluator) recursive(r *ir.Relation) ([]ir.AllowedSubject, []*ir.Relation, bool) {
	if !ev.fga {
		return nil, nil, false
	}
	var sets []ir.AllowedSubject
	var reads []*ir.Relation
	ok := false
	for _, a := range r.Allowed {
		if a.Relation == "" {
			continue
		}
		if a.Caveat != "" {
			return nil, nil, false
		}
		sets = append(sets, a)
		if a.Def == r.Def && readsStored(a.Rel, r) {
			reads, ok = ev.recursiveSet(a)
		}
	}
	return sets, reads, ok
}

// followRecursive answers the subject sets of stored relation r over ids as OpenFGA's
// recursive strategy does: it reads r's relation from the subject's side (reads: the
// objects whose own tuples hold the subject) and, when some hold and none failed,
// walks breadth first from each resource's subject sets (sets) to the first object
// that holds, a level a step of depth; when none holds, the read's verdict stands
// (the failure of a condition, or no).
func (ev *evaluator) followRecursive(ctx context.Context, r *ir.Relation, sets []ir.AllowedSubject, reads []*ir.Relation, ids []string, depth int, out results) error {
	side, err := ev.union(ctx, reads)
	if err != nil {
		return err
	}
	named := map[object][]object{} // the objects each object's subject sets name
	starts, err := ev.subjectSetsOf(ctx, r.Def.Name, ids, r.Name, sets, named)
	if err != nil {
		return err
	}
	for _, id := range ids {
		level := starts[object{r.Def.Name, id}]
		if len(level) == 0 {
			continue
		}
		o := side.failed
		if len(side.holds) > 0 {
			if o, err = ev.walkSets(ctx, r, sets, level, side, named, depth); err != nil {
				return err
			}
		}
		out.put(id, or(out.get(id), o))
	}
	return nil
}

// subjectSetsOf reads the subject sets (of the types sets admits) that the tuples of
// relation on typ's objects ids name, into named, which it returns.
func (ev *evaluator) subjectSetsOf(ctx context.Context, typ string, ids []string, relation string, sets []ir.AllowedSubject, named map[object][]object) (map[object][]object, error) {
	for _, id := range ids {
		named[object{typ, id}] = named[object{typ, id}][:0:0]
	}
	if d := ev.s.Definition(typ); d == nil || d.Relation(relation) == nil || d.Relation(relation).IsPermission() {
		return named, nil
	}
	for _, a := range sets {
		f := store.Filter{
			ResourceType: typ, ResourceIDs: ids, Relation: relation,
			Subject: &store.SubjectFilter{Type: a.Type, Relation: a.Relation, RelationSet: true},
		}
		es, err := ev.edges(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			k := object{typ, e.resource}
			named[k] = append(named[k], object{e.typ, e.target})
		}
	}
	return named, nil
}

// walkSets walks breadth first from level, each object's subject sets read once as
// the tuples of r's relation on it (whatever its type, as OpenFGA reads them; named
// keeps them for the request's other resources): has at the first object of r's
// type side holds, no when the walk ends, a depth error past depth levels.
func (ev *evaluator) walkSets(ctx context.Context, r *ir.Relation, sets []ir.AllowedSubject, level []object, side *subjectSide, named map[object][]object, depth int) (outcome, error) {
	visited := map[object]bool{}
	for steps := 1; len(level) > 0; steps++ {
		if steps > depth {
			return outErr, nil
		}
		unread := map[string][]string{}
		queued := map[object]bool{}
		for _, x := range level {
			if x.typ == r.Def.Name && side.holds[x.id] {
				return outHas, nil
			}
			if _, ok := named[x]; !ok && !queued[x] {
				queued[x] = true
				unread[x.typ] = append(unread[x.typ], x.id)
			}
		}
		for typ, ids := range unread {
			if _, err := ev.subjectSetsOf(ctx, typ, ids, r.Name, sets, named); err != nil {
				return outcome{}, err
			}
		}
		var next []object
		for _, x := range level {
			if !visited[x] {
				visited[x] = true
				next = append(next, named[x]...)
			}
		}
		level = next
	}
	return outNo, nil
}
