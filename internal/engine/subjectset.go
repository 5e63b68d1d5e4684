package engine

import "slices"

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

// exclusionFor is the exclusion e for which and(wild, not(e)) is part, for a part no
// larger than wild. Where both are conditional on different parameters, the result's
// missing parameters are the union of both.
func exclusionFor(wild, part outcome) outcome {
	switch {
	case sameOutcome(wild, part):
		return outNo
	case part.st == no:
		return outHas
	default:
		return not(part)
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

func sameOutcome(a, b outcome) bool {
	return a.st == b.st && slices.Equal(a.missing, b.missing)
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
