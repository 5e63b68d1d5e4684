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
// error. A relation on a cycle of the model resolves its subject sets otherwise
// (OpenFGA's default strategy: only the subject sets' own tuples count).
//
// The evaluator applies this where OpenFGA does, as internal/fga marks it from
// OpenFGA's weighted graph of the model (ir.AllowedSubject.FromSubject,
// ir.Expr.FromSubject), for an object subject, when the subject set has no condition
// and its relation is, through computed relations, a relation of tuples (what
// OpenFGA reads in one step).

// viaSubject returns the relation of tuples OpenFGA reads from the subject's side
// for p (a member of another definition), following computed relations, and false
// when p is not such a relation (a union, say, which OpenFGA reads otherwise). The
// relation is nil when it names no subject of the subject's type. Its subject sets
// are not read: FromSubject marks only those whose subject sets never reach the
// subject's type.
func (ev *evaluator) viaSubject(p *ir.Relation) (*ir.Relation, bool) {
	for range len(ev.s.Relations) {
		if !p.IsPermission() || p.Rewrite.Kind != ir.Ref {
			break
		}
		p = p.Rewrite.Rel
	}
	if p.IsPermission() {
		return nil, false
	}
	for _, a := range p.Allowed {
		if a.Relation == "" && a.Type == ev.subject.Object.Type {
			return p, true
		}
	}
	return nil, true
}

// weight2Userset returns the relation of tuples to read from the subject's side for
// the subject sets of allowed entry a of the relation being evaluated, or nil when
// OpenFGA follows them by their own tuples.
func (ev *evaluator) weight2Userset(a ir.AllowedSubject) *ir.Relation {
	if !ev.fga || ev.subject.Relation != "" || a.Caveat != "" || !slices.Contains(a.FromSubject, ev.subject.Object.Type) {
		return nil
	}
	s, _ := ev.viaSubject(a.Rel)
	return s
}

// weight2Arrow returns, by parent type, the relations of tuples to read from the
// subject's side for arrow x (a parent type whose target names no subject of the
// subject's type has none), or nil when OpenFGA follows the arrow's tuples.
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
		s, ok := ev.viaSubject(target)
		if !ok {
			return nil
		}
		if s != nil {
			out[a.Type] = s
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
