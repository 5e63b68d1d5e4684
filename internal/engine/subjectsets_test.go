package engine

import (
	"context"
	"maps"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// This file holds the reference LookupSubjects tests hold the streamed one to: the
// same answer computed by set algebra, each (relation, object)'s whole set of
// subjects in memory.

// subjectSet is the set of subjects (of the requested type) holding something on one
// object: concrete subjects, possibly a wildcard, and the subjects excluded from that
// wildcard. A subject x is a member when or(concrete[x], and(wild, not(excluded[x]))).
// Each part carries an outcome, so caveated members stay conditional. excluded is empty
// whenever wild is no.
//
// The operators are exact: for every subject x, member(op(a, b), x) equals
// op(member(a, x), member(b, x)) (subjectset_test.go holds them to that for every pair
// of small sets). Which subjects they list concretely and which as exclusions follows
// SpiceDB's LookupSubjects, so that clients see the same shape of answer: a union keeps
// concrete subjects beside the wildcard, a difference of two wildcards turns the
// subtrahend's exclusions into concrete subjects, an intersection keeps the concrete
// subjects the other side holds.
//
// parts, when not nil, is the set as SpiceDB reports a relation's subjects: the
// subjects its relationships name, and each subject set's members, as separate parts
// that are not merged (a wildcard in one part keeps excluding a subject another part
// names). The set's own fields are their exact union, which every operator works on;
// a permission's rewrite merges them, so a permission's set has no parts.
type subjectSet struct {
	concrete results
	wild     outcome
	excluded results
	parts    []*subjectSet
}

func newSubjectSet() *subjectSet {
	return &subjectSet{concrete: results{}, excluded: results{}}
}

// member is x's outcome in s.
func (s *subjectSet) member(x string) outcome {
	return or(s.concrete.get(x), s.wildMember(x))
}

// wildMember is x's outcome through s's wildcard alone.
func (s *subjectSet) wildMember(x string) outcome {
	if s.wild.st == no {
		return outNo
	}
	return and(s.wild, not(s.excluded.get(x)))
}

func (s *subjectSet) clone() *subjectSet {
	return &subjectSet{concrete: clone(s.concrete), wild: s.wild, excluded: clone(s.excluded)}
}

// unionSets: concrete subjects of both sides, and a wildcard covering what either
// side's wildcard covers.
func unionSets(a, b *subjectSet) *subjectSet {
	out := newSubjectSet()
	for _, id := range unionKeys(a.concrete, b.concrete) {
		out.concrete.put(id, or(a.concrete.get(id), b.concrete.get(id)))
	}
	out.wild = or(a.wild, b.wild)
	out.exclude(func(x string) outcome { return or(a.wildMember(x), b.wildMember(x)) }, a.excluded, b.excluded)
	return out
}

// intersectSets: a concrete subject of either side is in when the other side holds it
// too (by its concrete entry or its wildcard); wildcards intersect, exclusions add up.
func intersectSets(a, b *subjectSet) *subjectSet {
	out := newSubjectSet()
	for _, id := range unionKeys(a.concrete, b.concrete) {
		ca, cb := a.concrete.get(id), b.concrete.get(id)
		out.concrete.put(id, or(and(ca, cb), or(and(ca, b.wildMember(id)), and(cb, a.wildMember(id)))))
	}
	out.wild = and(a.wild, b.wild)
	out.exclude(func(x string) outcome { return and(a.wildMember(x), b.wildMember(x)) }, a.excluded, b.excluded)
	return out
}

// excludeSets is a minus b: a's concrete subjects survive where b does not hold them;
// a's wildcard survives where b's does not apply, less every subject b holds; and the
// subjects b's wildcard excludes but a's wildcard covers become concrete.
func excludeSets(a, b *subjectSet) *subjectSet {
	out := newSubjectSet()
	for id, o := range a.concrete {
		out.concrete.put(id, and(o, not(b.member(id))))
	}
	if a.wild.st != no {
		for id := range b.excluded {
			fromWild := and(a.wildMember(id), not(b.member(id)))
			out.concrete.put(id, or(out.concrete.get(id), fromWild))
		}
	}
	out.wild = and(a.wild, not(b.wild))
	out.exclude(func(x string) outcome { return and(a.wildMember(x), not(b.member(x))) }, a.excluded, b.concrete, b.excluded)
	return out
}

// exclude fills s.excluded, for the subjects in the key sets, so that s's wildcard
// covers each subject x exactly as far as part(x) says; subjects outside the key sets
// are covered as far as s.wild says. A subject listed concretely with certainty needs
// no exclusion; one listed conditionally is excluded only where it is not listed.
func (s *subjectSet) exclude(part func(x string) outcome, keys ...results) {
	if s.wild.st == no {
		return
	}
	for _, k := range keys {
		for id := range k {
			if _, done := s.excluded[id]; done {
				continue
			}
			e := exclusionFor(s.wild, part(id))
			s.excluded.put(id, and(e, not(s.concrete.get(id))))
		}
	}
}

// withCaveat ANDs a relationship's caveat outcome into every member of s (and of each
// of its parts).
func withCaveat(s *subjectSet, c outcome) *subjectSet {
	if c.st == has {
		return s
	}
	out := newSubjectSet()
	for id, o := range s.concrete {
		out.concrete.put(id, and(c, o))
	}
	out.wild = and(c, s.wild)
	if out.wild.st != no {
		out.excluded = clone(s.excluded)
	}
	for _, p := range s.parts {
		out.parts = append(out.parts, withCaveat(p, c))
	}
	return out
}

// empty reports whether s has no members.
func (s *subjectSet) empty() bool { return s.wild.st == no && len(s.concrete) == 0 }

// partsOf is s as parts: its own, or s itself when it is one.
func partsOf(s *subjectSet) []*subjectSet {
	if s.parts != nil {
		return s.parts
	}
	return []*subjectSet{s}
}

func unionKeys(a, b results) []string {
	out := make([]string, 0, len(a)+len(b))
	for id := range a {
		out = append(out, id)
	}
	for id := range b {
		if _, ok := a[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// LookupSubjectsBySets answers req as LookupSubjects does, by set algebra: its
// concrete subjects in id order, then the wildcard of each part.
func (e *Engine) LookupSubjectsBySets(ctx context.Context, s *ir.Schema, r store.Reader, req LookupSubjectsRequest, yield func(FoundSubject) error) error {
	target, err := subjectsTarget(s, req)
	if err != nil {
		return err
	}
	l := &subjectLookup{
		ev: newEvaluator(s, r, rel.SubjectRef{}, req.Context, shared{}), typ: req.SubjectType, subjRel: req.SubjectRelation,
		sets: newDepthMemo[*subjectSet](),
	}
	set, err := l.relation(ctx, target, req.Resource.ID, e.maxDepth)
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(set.concrete)) {
		res, err := toResult(set.concrete[id])
		if err != nil {
			return err
		}
		if err := yield(FoundSubject{ID: id, Result: res}); err != nil {
			return err
		}
	}
	var wilds distinctWildcards
	for _, p := range partsOf(set) {
		if err := wilds.yield(p.wild, p.excluded, yield); err != nil {
			return err
		}
	}
	return nil
}

// subjectLookup computes subject sets per (relation, object), memoized under the depth
// limit (depthMemo).
type subjectLookup struct {
	ev      *evaluator // for caveats
	typ     string
	subjRel string
	sets    depthMemo[*subjectSet]
}

func (l *subjectLookup) relation(ctx context.Context, r *ir.Relation, id string, depth int) (*subjectSet, error) {
	return l.sets.get(ctx, memoKey{r, id}, depth, func() (*subjectSet, error) {
		var set *subjectSet
		var err error
		if r.IsPermission() {
			if set, err = l.expr(ctx, r.Def, r.Rewrite, id, depth); err == nil && set.parts != nil {
				set = set.clone() // merged: a rewrite reports one set
			}
		} else {
			set, err = l.direct(ctx, r, id, depth)
		}
		if err != nil {
			return nil, err
		}
		if l.subjRel != "" && r.Def.Name == l.typ && r.Name == l.subjRel {
			parts := set.parts
			set = set.clone()
			set.parts = parts
			set.concrete.put(id, outHas) // a subject set is a member of itself
		}
		return set, nil
	})
}

// direct is the subjects of relation r on id: those its relationships name (named)
// and the members of the subject sets they name (out), united, and apart as parts
// (subjectSet) when subject sets contributed.
func (l *subjectLookup) direct(ctx context.Context, r *ir.Relation, id string, depth int) (*subjectSet, error) {
	named, out := newSubjectSet(), newSubjectSet()
	var parts []*subjectSet
	f := store.Filter{ResourceType: r.Def.Name, ResourceIDs: []string{id}, Relation: r.Name}
	for item, err := range l.ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		x := item.Relationship
		c := l.ev.caveat(x.Caveat)
		s := x.Subject
		if s.Object.Type == l.typ && s.Relation == l.subjRel {
			if s.Object.ID == rel.Wildcard {
				named.wild = or(named.wild, c)
			} else {
				named.concrete.put(s.Object.ID, or(named.concrete.get(s.Object.ID), c))
			}
		}
		if s.Relation == "" || s.Object.ID == rel.Wildcard {
			continue
		}
		sdef := l.ev.s.Definition(s.Object.Type)
		sub, err := l.relation(ctx, sdef.Relation(s.Relation), s.Object.ID, depth-1)
		if err != nil {
			return nil, err
		}
		sub = withCaveat(sub, c)
		out = unionSets(out, sub)
		for _, p := range partsOf(sub) {
			if !p.empty() {
				parts = append(parts, p)
			}
		}
	}
	set := unionSets(named, out)
	if len(parts) > 0 {
		if !named.empty() {
			parts = append(parts, named)
		}
		set.parts = parts
	}
	return set, nil
}

func (l *subjectLookup) expr(ctx context.Context, def *ir.Definition, x *ir.Expr, id string, depth int) (*subjectSet, error) {
	switch x.Kind {
	case ir.Ref:
		return l.relation(ctx, x.Rel, id, depth-1)
	case ir.Union, ir.Intersection, ir.Exclusion:
		acc, err := l.expr(ctx, def, x.Children[0], id, depth)
		if err != nil {
			return nil, err
		}
		for _, c := range x.Children[1:] {
			next, err := l.expr(ctx, def, c, id, depth)
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
		return l.arrow(ctx, def, x, id, depth)
	}
	return newSubjectSet(), nil
}

func (l *subjectLookup) arrow(ctx context.Context, def *ir.Definition, x *ir.Expr, id string, depth int) (*subjectSet, error) {
	f := store.Filter{ResourceType: def.Name, ResourceIDs: []string{id}, Relation: x.Tupleset}
	var acc *subjectSet
	for item, err := range l.ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		s := item.Relationship.Subject
		target := x.TargetOn(l.ev.s.Definition(s.Object.Type))
		sub := newSubjectSet()
		if target == nil {
			if x.ArrowKind == ir.ArrowAny {
				continue
			}
		} else {
			c := l.ev.caveat(item.Relationship.Caveat)
			var err error
			if sub, err = l.relation(ctx, target, s.Object.ID, depth-1); err != nil {
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
