package validationfile

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
)

// found is one subject reached by expanding a permission, with what zed's expected
// relations record of it: whether a caveat conditions it (zed never evaluates caveats
// here, so only whether an expression exists matters, and that is all that is kept),
// the subjects a wildcard leaves out, and the relations (`type:id#relation`) whose
// relationships named it.
type found struct {
	id        string
	caveated  bool
	excluded  []*found // wildcards only
	resources map[string]struct{}
}

// derive makes the subject an operation produces from sources: it was reached through
// every relation that any of them was.
func derive(id string, caveated bool, excluded []*found, sources ...*found) *found {
	f := &found{id: id, caveated: caveated, excluded: excluded, resources: map[string]struct{}{}}
	for _, s := range sources {
		maps.Copy(f.resources, s.resources)
	}
	return f
}

// caveat-expression presence under the combinators SpiceDB's subject sets use: `and`
// and the plain `or` keep an expression when either side has one; the short-circuited
// `or` (a union of memberships) has one only when both sides do; `not` keeps it.
func and(a, b bool) bool            { return a || b }
func shortcircuitOr(a, b bool) bool { return a && b }

// subjectSet holds the found subjects of one subject type (and relation): concrete ids
// and at most one wildcard, with the set algebra of SpiceDB's developer tooling, in
// which a wildcard and concrete subjects coexist and exclusions may be caveated.
type subjectSet struct {
	concrete map[string]*found
	wildcard *found
}

func newSubjectSet() *subjectSet { return &subjectSet{concrete: map[string]*found{}} }

func (s *subjectSet) clone() *subjectSet {
	return &subjectSet{concrete: maps.Clone(s.concrete), wildcard: s.wildcard}
}

// members lists the concrete subjects in id order, then the wildcard.
func (s *subjectSet) members() []*found {
	out := make([]*found, 0, len(s.concrete)+1)
	for _, id := range slices.Sorted(maps.Keys(s.concrete)) {
		out = append(out, s.concrete[id])
	}
	if s.wildcard != nil {
		out = append(out, s.wildcard)
	}
	return out
}

func (s *subjectSet) setConcrete(id string, f *found) {
	if f == nil {
		delete(s.concrete, id)
		return
	}
	s.concrete[id] = f
}

// add unions f into s.
func (s *subjectSet) add(f *found) {
	if f.id == rel.Wildcard {
		w := unionWildcards(s.wildcard, f)
		for _, c := range s.concrete {
			w = wildcardPlusConcrete(w, c)
		}
		s.wildcard = w
		return
	}
	s.setConcrete(f.id, unionConcretes(s.concrete[f.id], f))
	s.wildcard = wildcardPlusConcrete(s.wildcard, f)
}

func (s *subjectSet) addAll(o *subjectSet) {
	for _, f := range o.members() {
		s.add(f)
	}
}

// subtract removes f from s.
func (s *subjectSet) subtract(f *found) {
	if f.id != rel.Wildcard {
		if c, ok := s.concrete[f.id]; ok {
			s.setConcrete(f.id, concreteMinusConcrete(c, f))
		}
		if s.wildcard != nil {
			s.wildcard = wildcardMinusConcrete(s.wildcard, f)
		}
		return
	}
	for id, c := range s.concrete {
		s.setConcrete(id, concreteMinusWildcard(c, f))
	}
	w, freed := wildcardMinusWildcard(s.wildcard, f)
	s.wildcard = w
	for _, c := range freed {
		s.setConcrete(c.id, c)
	}
}

// intersect keeps in s what o holds too.
func (s *subjectSet) intersect(o *subjectSet) {
	mine := s.wildcard
	s.wildcard = intersectWildcards(mine, o.wildcard)
	kept := make(map[string]*found, len(s.concrete))
	for id, c := range s.concrete {
		var both *found
		if oc, ok := o.concrete[id]; ok {
			both = derive(id, and(c.caveated, oc.caveated), nil, c, oc)
		}
		if r := unionConcretes(both, concreteInWildcard(c, o.wildcard)); r != nil {
			kept[id] = r
		}
	}
	if mine != nil {
		for id, oc := range o.concrete {
			if r := unionConcretes(kept[id], concreteInWildcard(oc, mine)); r != nil {
				kept[id] = r
			}
		}
	}
	s.concrete = kept
}

// withCaveat conditions every member on a caveat (of the relationship the set was
// reached through).
func (s *subjectSet) withCaveat() *subjectSet {
	out := newSubjectSet()
	for id, c := range s.concrete {
		out.concrete[id] = derive(id, true, nil, c)
	}
	if w := s.wildcard; w != nil {
		out.wildcard = derive(rel.Wildcard, true, w.excluded, w)
	}
	return out
}

func unionConcretes(a, b *found) *found {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return derive(a.id, shortcircuitOr(a.caveated, b.caveated), nil, a, b)
}

// unionWildcards: conditions are or'ed and exclusions intersected, since what one
// wildcard excludes the other one holds unless it excludes it too.
func unionWildcards(a, b *found) *found {
	if a == nil {
		return b
	}
	ex := exclusionSet(a)
	ex.intersect(exclusionSet(b))
	return derive(rel.Wildcard, shortcircuitOr(a.caveated, b.caveated), ex.members(), a, b)
}

// wildcardPlusConcrete: a concrete subject added beside a wildcard that excludes it
// lifts the exclusion, fully or, when the subject is caveated, under its caveat.
func wildcardPlusConcrete(w, c *found) *found {
	if w == nil {
		return nil
	}
	ex := make([]*found, 0, len(w.excluded))
	for _, e := range w.excluded {
		switch {
		case e.id != c.id:
			ex = append(ex, e)
		case c.caveated:
			ex = append(ex, derive(c.id, true, nil, e, c))
		}
	}
	return derive(rel.Wildcard, w.caveated, ex, w)
}

func concreteMinusConcrete(c, r *found) *found {
	if !r.caveated {
		return nil
	}
	return derive(c.id, true, nil, c, r)
}

// wildcardMinusConcrete adds r to the wildcard's exclusions; an exclusion is
// unconditional once either removal of it is.
func wildcardMinusConcrete(w, r *found) *found {
	ex := make([]*found, 0, len(w.excluded)+1)
	seen := false
	for _, e := range w.excluded {
		if e.id == r.id {
			ex = append(ex, derive(r.id, shortcircuitOr(e.caveated, r.caveated), nil, e, r))
			seen = true
			continue
		}
		ex = append(ex, e)
	}
	if !seen {
		ex = append(ex, r)
	}
	return derive(rel.Wildcard, w.caveated, ex, w)
}

// concreteMinusWildcard: the wildcard removes c unless it excludes c; conditions on
// either make the outcome conditional instead.
func concreteMinusWildcard(c, w *found) *found {
	e := exclusionOf(w, c.id)
	switch {
	case e == nil && !w.caveated:
		return nil
	case e == nil:
		return derive(c.id, true, nil, c)
	case !e.caveated:
		return c
	}
	return derive(c.id, true, nil, c)
}

// wildcardMinusWildcard returns what is left of w and the subjects that r excluded but
// w holds, which become concrete members.
func wildcardMinusWildcard(w, r *found) (*found, []*found) {
	if w == nil || !r.caveated && len(r.excluded) == 0 {
		return nil, nil
	}
	var freed []*found
	for _, x := range r.excluded {
		e := exclusionOf(w, x.id)
		if e != nil && !e.caveated {
			continue
		}
		freed = append(freed, derive(x.id, w.caveated || r.caveated || x.caveated || e != nil, nil, x))
	}
	if !w.caveated && !r.caveated {
		return nil, freed
	}
	return derive(rel.Wildcard, true, w.excluded, w, r), freed
}

// intersectWildcards: conditions are and'ed and exclusions united.
func intersectWildcards(a, b *found) *found {
	if a == nil || b == nil {
		return nil
	}
	ex := exclusionSet(a)
	ex.addAll(exclusionSet(b))
	return derive(rel.Wildcard, and(a.caveated, b.caveated), ex.members(), a, b)
}

// concreteInWildcard is c as far as wildcard w covers it.
func concreteInWildcard(c, w *found) *found {
	if w == nil {
		return nil
	}
	e := exclusionOf(w, c.id)
	switch {
	case e == nil && !w.caveated:
		return c
	case e == nil:
		return derive(c.id, true, nil, c, w)
	case !e.caveated:
		return nil
	}
	return derive(c.id, true, nil, c, w, e)
}

func exclusionOf(w *found, id string) *found {
	for _, e := range w.excluded {
		if e.id == id {
			return e
		}
	}
	return nil
}

func exclusionSet(w *found) *subjectSet {
	s := newSubjectSet()
	for _, e := range w.excluded {
		s.add(e)
	}
	return s
}

// trackingSet is a permission's found subjects, one subjectSet per subject type and
// relation ("user", "group#member").
type trackingSet map[string]*subjectSet

func subjectKey(typ, relation string) string {
	if relation == "" {
		return typ
	}
	return typ + "#" + relation
}

func (t trackingSet) set(key string) *subjectSet {
	s, ok := t[key]
	if !ok {
		s = newSubjectSet()
		t[key] = s
	}
	return s
}

func (t trackingSet) union(o trackingSet) {
	for k, s := range o {
		t.set(k).addAll(s)
	}
}

// intersect keeps only subject types both sides hold, intersected.
func (t trackingSet) intersect(o trackingSet) trackingSet {
	out := trackingSet{}
	for k, s := range t {
		if os, ok := o[k]; ok {
			c := s.clone()
			c.intersect(os)
			out[k] = c
		}
	}
	return out
}

func (t trackingSet) exclude(o trackingSet) trackingSet {
	out := trackingSet{}
	for k, s := range t {
		c := s.clone()
		if os, ok := o[k]; ok {
			for _, f := range os.members() {
				c.subtract(f)
			}
		}
		out[k] = c
	}
	return out
}

func (t trackingSet) withCaveat() trackingSet {
	out := trackingSet{}
	for k, s := range t {
		out[k] = s.withCaveat()
	}
	return out
}

// FoundSubject is one subject the expansion of a permission reached, as the validation
// section writes it: `[user:tom[...]] is <document:1#viewer>/<group:eng#member>`.
type FoundSubject struct {
	SubjectText
	// Resources are the relations (`type:id#relation`) whose relationships named the
	// subject, sorted.
	Resources []string
}

// String renders the subject as a line of the validation section.
func (f FoundSubject) String() string { return subjectLine(f.SubjectText, f.Resources) }

// subjectLine renders `[subject] is <relation>/<relation>`, or `[subject]` alone
// when no relation is given.
func subjectLine(s SubjectText, resources []string) string {
	line := "[" + s.String() + "]"
	if len(resources) == 0 {
		return line
	}
	wrapped := make([]string, len(resources))
	for i, r := range resources {
		wrapped[i] = "<" + r + ">"
	}
	return line + " is " + strings.Join(wrapped, "/")
}

// SubjectText is a subject as the validation section names it: `user:tom`,
// `group:eng#member`, `user:tom[...]` (caveated), `user:* - {user:bob}`.
type SubjectText struct {
	Subject  string // type:id or type:id#relation
	Caveated bool
	// Excluded lists what a wildcard leaves out, sorted; each may be caveated.
	Excluded []SubjectText
}

// String renders the subject text without brackets.
func (s SubjectText) String() string {
	out := s.Subject
	if s.Caveated {
		out += "[...]"
	}
	if len(s.Excluded) > 0 {
		out += " - {" + excludedString(s.Excluded) + "}"
	}
	return out
}

func excludedString(ex []SubjectText) string {
	parts := make([]string, len(ex))
	for i, e := range ex {
		parts[i] = e.String()
	}
	return strings.Join(parts, ", ")
}

// list renders t as found subjects sorted as zed sorts its generated lines.
func (t trackingSet) list() []FoundSubject {
	var out []FoundSubject
	for key, s := range t {
		typ, relation, _ := strings.Cut(key, "#")
		for _, f := range s.members() {
			out = append(out, f.text(typ, relation))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func (f *found) text(typ, relation string) FoundSubject {
	subject := rel.SubjectRef{Object: rel.ObjectRef{Type: typ, ID: f.id}, Relation: relation}
	st := SubjectText{Subject: subject.String(), Caveated: f.caveated}
	for _, e := range f.excluded {
		st.Excluded = append(st.Excluded, e.text(typ, relation).SubjectText)
	}
	sort.Slice(st.Excluded, func(i, j int) bool { return st.Excluded[i].String() < st.Excluded[j].String() })
	return FoundSubject{SubjectText: st, Resources: slices.Sorted(maps.Keys(f.resources))}
}
