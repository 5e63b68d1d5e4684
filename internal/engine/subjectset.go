package engine

import "slices"

// subjectSet is the set of subjects (of the requested type) holding something on one
// object: concrete subjects, possibly a wildcard, and the subjects excluded from that
// wildcard. A subject x is a member when or(concrete[x], and(wild, not(excluded[x]))).
// Each part carries an outcome, so caveated members stay conditional.
type subjectSet struct {
	concrete results
	wild     outcome
	excluded results
}

func newSubjectSet() *subjectSet {
	return &subjectSet{concrete: results{}, excluded: results{}}
}

// member is x's outcome in s.
func (s *subjectSet) member(x string) outcome {
	return or(s.concrete.get(x), and(s.wild, not(s.excluded.get(x))))
}

func (s *subjectSet) clone() *subjectSet {
	return &subjectSet{concrete: clone(s.concrete), wild: s.wild, excluded: clone(s.excluded)}
}

// union: a subject added concretely on one side is no longer excluded from the other
// side's wildcard; a subject stays excluded from the union's wildcard only when every
// side with a wildcard excludes it.
func unionSets(a, b *subjectSet) *subjectSet {
	out := newSubjectSet()
	for _, s := range []*subjectSet{a, b} {
		for id, o := range s.concrete {
			out.concrete.put(id, or(out.concrete.get(id), o))
		}
	}
	out.wild = or(a.wild, b.wild)
	if out.wild.st != no {
		for _, id := range unionKeys(a.excluded, b.excluded) {
			e := outHas
			for _, s := range []*subjectSet{a, b} {
				if s.wild.st != no {
					e = and(e, s.excluded.get(id))
				}
			}
			out.excluded.put(id, and(e, not(out.concrete.get(id))))
		}
	}
	return out
}

// intersectSets: a concrete subject of either side is in when the other side holds it
// too (by its concrete entry or its wildcard); wildcards intersect, exclusions add up.
func intersectSets(a, b *subjectSet) *subjectSet {
	out := newSubjectSet()
	for _, id := range unionKeys(a.concrete, b.concrete) {
		out.concrete.put(id, and(a.member(id), b.member(id)))
	}
	out.wild = and(a.wild, b.wild)
	if out.wild.st != no {
		for _, id := range unionKeys(a.excluded, b.excluded) {
			out.excluded.put(id, or(a.excluded.get(id), b.excluded.get(id)))
		}
	}
	return out
}

// excludeSets is a minus b: concrete subjects of a survive where b does not hold them;
// a's wildcard survives b's wildcard only conditionally, and every subject b holds is
// excluded from it.
func excludeSets(a, b *subjectSet) *subjectSet {
	out := newSubjectSet()
	for id, o := range a.concrete {
		out.concrete.put(id, and(o, not(b.member(id))))
	}
	out.wild = and(a.wild, not(b.wild))
	if out.wild.st != no {
		for _, id := range unionKeys(a.excluded, b.concrete) {
			out.excluded.put(id, or(a.excluded.get(id), b.member(id)))
		}
	}
	return out
}

// withCaveat ANDs a relationship's caveat outcome into every member of s.
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
	return out
}

// equalSets reports whether two sets hold the same entries with the same outcomes.
func equalSets(a, b *subjectSet) bool {
	return sameOutcome(a.wild, b.wild) && equalResults(a.concrete, b.concrete) && equalResults(a.excluded, b.excluded)
}

func equalResults(a, b results) bool {
	if len(a) != len(b) {
		return false
	}
	for id, o := range a {
		p, ok := b[id]
		if !ok || !sameOutcome(o, p) {
			return false
		}
	}
	return true
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
