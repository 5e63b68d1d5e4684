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
// group#member), or its arrow to itself (`viewer from parent`, parent of the same
// type), is read the same way and then walked breadth first from the object (its
// recursive strategy); other subject sets on a cycle of the model are resolved by
// OpenFGA's default strategy, where only the subject sets' own tuples count.
//
// OpenFGA evaluates one tuple per object of such a read, the first its store yields:
// a contextual tuple before a stored one, which the engine follows
// (contextualReader); of stored tuples alone, for its memory store the first
// written, which is not modelled: the engine evaluates every stored tuple of the
// read.
//
// The evaluator applies this where OpenFGA does, as internal/fga marks it from
// OpenFGA's weighted graph of the model (ir.AllowedSubject.FromSubject,
// ir.Expr.FromSubject), for an object subject, when the subject set has no condition
// and its relation is, through computed relations, a relation of tuples or a union,
// intersection or exclusion of such (what OpenFGA reads in one step, by its fast
// path, as merged streams: sideOf). Of a union, each operand is a read of its own,
// and one that fails with none of its tuples holding fails the whole, whatever the
// others hold (OpenFGA's merge of the reads stops at the failure); an intersection or
// exclusion stops at its first operand that found nothing.

// sidePlan is what OpenFGA's weight-two strategy reads from the subject's side for a
// relation, as its fast path builds it from the relation's rewrite through computed
// relations: the tuples of a stored relation (read), a union, intersection or
// exclusion of such (op, over children, each a stream of its own), or nothing for an
// arrow (none).
type sidePlan struct {
	read     *ir.Relation
	op       ir.ExprKind
	children []*sidePlan
	none     bool
}

// subjectPlan returns what OpenFGA reads from the subject's side for p (a member of
// another definition), and false when p is something it reads otherwise. A
// relation's subject sets are not read: FromSubject marks only those whose subject
// sets never reach the subject's type.
func (ev *evaluator) subjectPlan(p *ir.Relation) (*sidePlan, bool) {
	return ev.relationPlan(p, len(ev.s.Relations))
}

func (ev *evaluator) relationPlan(p *ir.Relation, budget int) (*sidePlan, bool) {
	if budget == 0 {
		return nil, false
	}
	if !p.IsPermission() {
		return &sidePlan{read: p}, true
	}
	return ev.exprPlan(p.Rewrite, budget-1)
}

func (ev *evaluator) exprPlan(x *ir.Expr, budget int) (*sidePlan, bool) {
	switch x.Kind {
	case ir.Ref:
		return ev.relationPlan(x.Rel, budget)
	case ir.Arrow:
		// OpenFGA reads nothing for it: it is not one step from the subject
		// (FromSubject says so), as weighed from the subject's type.
		return &sidePlan{none: true}, true
	case ir.Union, ir.Intersection, ir.Exclusion:
		out := &sidePlan{op: x.Kind}
		for _, c := range x.Children {
			cp, ok := ev.exprPlan(c, budget)
			if !ok {
				return nil, false
			}
			out.children = append(out.children, cp)
		}
		return out, true
	}
	return nil, false
}

// unionReads counts the reads of a plan of unions alone, and false for a plan with
// an intersection or exclusion.
func (p *sidePlan) unionReads() (int, bool) {
	switch {
	case p.read != nil:
		return 1, true
	case p.none:
		return 0, true
	case p.op != ir.Union:
		return 0, false
	}
	n := 0
	for _, c := range p.children {
		k, ok := c.unionReads()
		if !ok {
			return 0, false
		}
		n += k
	}
	return n, true
}

// weight2Userset returns what to read from the subject's side for the subject sets
// of allowed entry a of the relation being evaluated, or false when OpenFGA follows
// them by their own tuples.
func (ev *evaluator) weight2Userset(a ir.AllowedSubject) (*sidePlan, bool) {
	if !ev.fga || ev.subject.Relation != "" || a.Caveat != "" || !slices.Contains(a.FromSubject, ev.subject.Object.Type) {
		return nil, false
	}
	return ev.subjectPlan(a.Rel)
}

// weight2Arrow returns, by parent type, what to read from the subject's side for
// arrow x, or nil when OpenFGA follows the arrow's tuples (also when, of several
// parent types, a target is a union of several reads: OpenFGA's answer then depends
// on which parent's read comes first).
func (ev *evaluator) weight2Arrow(x *ir.Expr) map[string]*sidePlan {
	if !ev.fga || ev.subject.Relation != "" || x.ArrowKind != ir.ArrowAny || !slices.Contains(x.FromSubject, ev.subject.Object.Type) {
		return nil
	}
	out := map[string]*sidePlan{}
	for _, a := range x.TuplesetRel.Allowed {
		if a.Caveat != "" {
			return nil // OpenFGA fails on the parent's condition first
		}
		target := x.TargetOn(a.Def)
		if target == nil {
			continue
		}
		plan, ok := ev.subjectPlan(target)
		if !ok {
			return nil
		}
		out[a.Type] = plan
	}
	if len(out) > 1 {
		for _, plan := range out {
			if n, unions := plan.unionReads(); unions && n > 1 {
				return nil
			}
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

// sideOf reads plan as OpenFGA's fast path streams it: each read's objects in
// order, and a condition failing on its tuples an error only when none of them
// holds (a read "fails"); an operator's stream, once failed, sends its error before
// any object. A union fails when any operand fails. An intersection or exclusion
// first takes its operators' streams in order (one that failed fails it; one that
// found nothing ends it, empty) and then its reads' in order, stopping at the first
// that found nothing (empty: an exclusion's subtract leaves the base) or failed
// (failing it); an arrow is an operand that found nothing before any is taken.
func (ev *evaluator) sideOf(ctx context.Context, plan *sidePlan) (*subjectSide, error) {
	switch {
	case plan.read != nil:
		return ev.fromSubject(ctx, plan.read)
	case plan.none:
		return &subjectSide{failed: outNo}, nil
	}
	sides := make([]*subjectSide, len(plan.children))
	for i, c := range plan.children {
		side, err := ev.sideOf(ctx, c)
		if err != nil {
			return nil, err
		}
		sides[i] = side
	}
	if plan.op == ir.Union {
		out := &subjectSide{holds: map[string]bool{}, failed: outNo}
		for _, side := range sides {
			if side.fails() {
				return side, nil
			}
			for id := range side.holds {
				out.holds[id] = true
			}
		}
		return out, nil
	}
	empty := &subjectSide{failed: outNo}
	removed := -1 // the first operator operand that found nothing
	for i, c := range plan.children {
		if c.read == nil && sides[i].fails() {
			return sides[i], nil
		}
		if c.read == nil && removed < 0 && len(sides[i].holds) == 0 {
			removed = i
		}
	}
	if plan.op == ir.Exclusion && removed == 1 {
		return sides[0], nil
	}
	if removed >= 0 {
		return empty, nil
	}
	for i, side := range sides {
		switch {
		case side.fails():
			return side, nil
		case len(side.holds) == 0 && plan.op == ir.Exclusion && i == 1:
			return sides[0], nil
		case len(side.holds) == 0:
			return empty, nil
		}
	}
	out := &subjectSide{holds: map[string]bool{}, failed: outNo}
	for id := range sides[0].holds {
		keep := true
		for _, side := range sides[1:] {
			keep = keep && side.holds[id] != (plan.op == ir.Exclusion)
		}
		if keep {
			out.holds[id] = true
		}
	}
	return out, nil
}

// add records one tuple of object id whose condition came out as o.
func (s *subjectSide) add(id string, o outcome) {
	switch o.st {
	case has:
		s.holds[id] = true
	case no:
	default:
		s.failed = or(s.failed, o)
	}
}

// contextualReader is a reader with a request's contextual tuples (OpenFGA's, from
// internal/fga); Contextual returns those f matches, in key order. OpenFGA reads a
// user's tuples from the subject's side in object order, one tuple per object, a
// contextual tuple before any stored one: of an object with a contextual tuple in
// the read, that tuple alone counts.
type contextualReader interface {
	Contextual(f store.Filter) []rel.Relationship
}

// fails reports whether the read or stream failed: nothing held and a condition
// failed to evaluate.
func (s *subjectSide) fails() bool { return len(s.holds) == 0 && s.failed.st != no }

// fromSubject reads stored relation s from the subject's side, as OpenFGA does:
// every tuple naming the subject or its type's wildcard, whatever its object (of an
// object with a contextual tuple, that one alone: contextualReader), remembered for
// the request.
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
	var contextual map[string]bool // objects with a contextual tuple in the read
	if cr, ok := ev.r.(contextualReader); ok {
		for _, x := range cr.Contextual(f) {
			if contextual == nil {
				contextual = map[string]bool{}
			}
			if !contextual[x.Resource.ID] {
				contextual[x.Resource.ID] = true
				side.add(x.Resource.ID, ev.caveat(x.Caveat))
			}
		}
	}
	for item, err := range ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		x := &item.Relationship
		if contextual[x.Resource.ID] {
			continue
		}
		ev.tr.read(x.Expiration)
		side.add(x.Resource.ID, ev.caveat(x.Caveat))
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
func (ev *evaluator) arrowFromSubject(ctx context.Context, all []edge, reads map[string]*sidePlan) (results, error) {
	sides := make(map[string]*subjectSide, len(reads))
	failed := outNo
	for typ, plan := range reads {
		side, err := ev.sideOf(ctx, plan)
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
func (ev *evaluator) recursiveSet(a ir.AllowedSubject) (*sidePlan, bool) {
	if !ev.fga || ev.subject.Relation != "" || a.Caveat != "" || !slices.Contains(a.FromSubject, ev.subject.Object.Type) {
		return nil, false
	}
	return ev.subjectPlan(a.Rel)
}

// recursiveArrow reports whether OpenFGA resolves arrow x by its recursive strategy:
// internal/fga marked it for the subject's type, and its target is the relation
// the arrow is in (`define viewer: [user] or viewer from parent`, parent of the same
// type alone); and what it then reads from the subject's side, the target's relation
// (its arrows read as nothing).
func (ev *evaluator) recursiveArrow(x *ir.Expr) (*sidePlan, bool) {
	if !ev.fga || ev.subject.Relation != "" || x.ArrowKind != ir.ArrowAny || !slices.Contains(x.FromSubject, ev.subject.Object.Type) {
		return nil, false
	}
	if len(x.TuplesetRel.Allowed) != 1 || x.TuplesetRel.Allowed[0].Def != x.TuplesetRel.Def {
		return nil, false
	}
	target := x.TargetOn(x.TuplesetRel.Def)
	if target == nil || !target.IsPermission() || !within(target.Rewrite, x) {
		return nil, false
	}
	return ev.subjectPlan(target)
}

// within reports whether expression e is x or has x among its operands, at any depth.
func within(e, x *ir.Expr) bool {
	return e == x || slices.ContainsFunc(e.Children, func(c *ir.Expr) bool { return within(c, x) })
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
func (ev *evaluator) recursive(r *ir.Relation) ([]ir.AllowedSubject, *sidePlan, bool) {
	if !ev.fga {
		return nil, nil, false
	}
	var sets []ir.AllowedSubject
	var reads *sidePlan
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
func (ev *evaluator) followRecursive(ctx context.Context, r *ir.Relation, sets []ir.AllowedSubject, reads *sidePlan, ids []string, depth int, out results) error {
	side, err := ev.sideOf(ctx, reads)
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
