package engine

import (
	"context"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// LookupSubjectsRequest asks for every subject of SubjectType (with SubjectRelation,
// "" for plain objects) that has Permission on Resource.
type LookupSubjectsRequest struct {
	Resource        rel.ObjectRef
	Permission      string
	SubjectType     string
	SubjectRelation string
	Context         map[string]any
}

// FoundSubject is one LookupSubjects result. A wildcard (ID "*") lists in Excluded the
// subjects it does not cover, each with how surely it is excluded.
type FoundSubject struct {
	ID       string
	Result   Result
	Excluded []FoundSubject
}

// LookupSubjects expands the permission forwards from the resource into the set of
// subjects of the requested type, with set algebra over wildcards: a wildcard minus
// some subjects is reported as "*" with those subjects excluded. Concrete subjects are
// yielded in id order, then the wildcard if any.
func (e *Engine) LookupSubjects(ctx context.Context, s *ir.Schema, r store.Reader, req LookupSubjectsRequest, yield func(FoundSubject) error) error {
	target, err := subjectsTarget(s, req)
	if err != nil {
		return err
	}
	l := &subjectLookup{
		ev: newEvaluator(s, r, rel.SubjectRef{}, req.Context, shared{}), typ: req.SubjectType, subjRel: req.SubjectRelation,
		sets: newFixpoint[memoKey](newSubjectSet, func(known, round *subjectSet) (*subjectSet, bool) {
			return round, !equalSets(known, round)
		}),
	}
	set, err := l.relation(ctx, target, req.Resource.ID)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(set.concrete))
	for id := range set.concrete {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		res, err := toResult(set.member(id))
		if err != nil {
			return err
		}
		if res.Membership == NoPermission {
			continue
		}
		if err := yield(FoundSubject{ID: id, Result: res}); err != nil {
			return err
		}
	}
	if set.wild.st == no {
		return nil
	}
	res, err := toResult(set.wild)
	if err != nil {
		return err
	}
	found := FoundSubject{ID: rel.Wildcard, Result: res}
	ex := make([]string, 0, len(set.excluded))
	for id := range set.excluded {
		ex = append(ex, id)
	}
	slices.Sort(ex)
	for _, id := range ex {
		r, err := toResult(set.excluded[id])
		if err != nil {
			return err
		}
		found.Excluded = append(found.Excluded, FoundSubject{ID: id, Result: r})
	}
	return yield(found)
}

// subjectLookup computes subject sets per (relation, object), memoized and, for
// recursive data, as fixpoints.
type subjectLookup struct {
	ev      *evaluator // for caveats
	typ     string
	subjRel string
	sets    *fixpoint[memoKey, *subjectSet]
}

func (l *subjectLookup) relation(ctx context.Context, r *ir.Relation, id string) (*subjectSet, error) {
	return l.sets.get(ctx, memoKey{r, id}, func() (*subjectSet, error) {
		var set *subjectSet
		var err error
		if r.IsPermission() {
			set, err = l.expr(ctx, r.Def, r.Rewrite, id)
		} else {
			set, err = l.direct(ctx, r, id)
		}
		if err == nil && l.subjRel != "" && r.Def.Name == l.typ && r.Name == l.subjRel {
			set = set.clone()
			set.concrete.put(id, outHas) // a subject set is a member of itself
		}
		return set, err
	}, nil)
}

func (l *subjectLookup) direct(ctx context.Context, r *ir.Relation, id string) (*subjectSet, error) {
	out := newSubjectSet()
	f := store.Filter{ResourceType: r.Def.Name, ResourceIDs: []string{id}, Relation: r.Name}
	for item, err := range l.ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		x := item.Relationship
		c, err := l.ev.caveat(x.Caveat)
		if err != nil {
			return nil, err
		}
		s := x.Subject
		if s.Object.Type == l.typ && s.Relation == l.subjRel {
			if s.Object.ID == rel.Wildcard {
				out = unionSets(out, &subjectSet{concrete: results{}, wild: c, excluded: results{}})
			} else {
				out.concrete.put(s.Object.ID, or(out.concrete.get(s.Object.ID), c))
			}
		}
		if s.Relation == "" || s.Object.ID == rel.Wildcard {
			continue
		}
		sdef := l.ev.s.Definition(s.Object.Type)
		sub, err := l.relation(ctx, sdef.Relation(s.Relation), s.Object.ID)
		if err != nil {
			return nil, err
		}
		out = unionSets(out, withCaveat(sub, c))
	}
	return out, nil
}

func (l *subjectLookup) expr(ctx context.Context, def *ir.Definition, x *ir.Expr, id string) (*subjectSet, error) {
	switch x.Kind {
	case ir.Ref:
		return l.relation(ctx, def.Relation(x.Name), id)
	case ir.Union, ir.Intersection, ir.Exclusion:
		acc, err := l.expr(ctx, def, x.Children[0], id)
		if err != nil {
			return nil, err
		}
		for _, c := range x.Children[1:] {
			next, err := l.expr(ctx, def, c, id)
			if err != nil {
				return nil, err
			}
			switch x.Kind {
			case ir.Union:
				acc = unionSets(acc, next)
			case ir.Intersection:
				acc = intersectSets(acc, next)
			default:
				acc = excludeSets(acc, next)
			}
		}
		return acc, nil
	case ir.Arrow:
		return l.arrow(ctx, def, x, id)
	}
	return newSubjectSet(), nil
}

func (l *subjectLookup) arrow(ctx context.Context, def *ir.Definition, x *ir.Expr, id string) (*subjectSet, error) {
	f := store.Filter{ResourceType: def.Name, ResourceIDs: []string{id}, Relation: x.Tupleset}
	var acc *subjectSet
	for item, err := range l.ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		s := item.Relationship.Subject
		target := l.ev.s.Definition(s.Object.Type).Relation(x.Target)
		sub := newSubjectSet()
		if target == nil {
			if x.ArrowKind == ir.ArrowAny {
				continue
			}
		} else {
			c, err := l.ev.caveat(item.Relationship.Caveat)
			if err != nil {
				return nil, err
			}
			if sub, err = l.relation(ctx, target, s.Object.ID); err != nil {
				return nil, err
			}
			sub = withCaveat(sub, c)
		}
		switch {
		case acc == nil:
			acc = sub
		case x.ArrowKind == ir.ArrowAll:
			acc = intersectSets(acc, sub)
		default:
			acc = unionSets(acc, sub)
		}
	}
	if acc == nil {
		return newSubjectSet(), nil
	}
	return acc, nil
}
