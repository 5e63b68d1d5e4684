package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The subject-set algebra is held to its definition: for every subject x,
// member(op(a, b), x) = op(member(a, x), member(b, x)). The sets enumerated are every
// set over two subjects whose concrete entries, wildcard and exclusions each take one
// of no, has or conditional (on a parameter named after the part, so that merged
// missing parameters show), and the subjects checked include one no set mentions.

var setOutcomes = []outcome{outNo, outHas, condOn([]string{"p"})}

var setUniverse = []string{"u0", "u1", "unseen"}

// allSets enumerates the sets over u0 and u1, keeping excluded empty without a wildcard.
func allSets() []*subjectSet {
	var out []*subjectSet
	for _, c0 := range setOutcomes {
		for _, c1 := range setOutcomes {
			for _, w := range setOutcomes {
				exclusions := setOutcomes
				if w.st == no {
					exclusions = []outcome{outNo}
				}
				for _, e0 := range exclusions {
					for _, e1 := range exclusions {
						s := newSubjectSet()
						s.concrete.put("u0", renamed(c0, "c0"))
						s.concrete.put("u1", renamed(c1, "c1"))
						s.wild = renamed(w, "w")
						s.excluded.put("u0", renamed(e0, "e0"))
						s.excluded.put("u1", renamed(e1, "e1"))
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

func renamed(o outcome, param string) outcome {
	if o.st == cond {
		return condOn([]string{param})
	}
	return o
}

type setOp struct {
	name  string
	sets  func(a, b *subjectSet) *subjectSet
	point func(a, b outcome) outcome
}

var setOps = []setOp{
	{"+", unionSets, or},
	{"&", intersectSets, and},
	{"-", excludeSets, func(a, b outcome) outcome { return and(a, not(b)) }},
}

func (s *subjectSet) String() string {
	str := func(o outcome) string {
		switch o.st {
		case has:
			return "has"
		case cond:
			return fmt.Sprintf("cond%v", o.missing())
		case depthErr:
			return "err"
		}
		return "no"
	}
	var b []string
	for _, id := range slices.Sorted(mapKeys(s.concrete)) {
		b = append(b, id+":"+str(s.concrete[id]))
	}
	if s.wild.st != no {
		w := "*:" + str(s.wild)
		for _, id := range slices.Sorted(mapKeys(s.excluded)) {
			w += " -" + id + ":" + str(s.excluded[id])
		}
		b = append(b, w)
	}
	return fmt.Sprintf("{%v}", b)
}

func mapKeys(r results) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range r {
			if !yield(k) {
				return
			}
		}
	}
}

// checkInvariants fails when a set lists a no entry or excludes without a wildcard.
func checkInvariants(t *testing.T, s *subjectSet, what string) {
	t.Helper()
	for id, o := range s.concrete {
		if o.st == no {
			t.Fatalf("%s: %v lists %s as no", what, s, id)
		}
	}
	for id, o := range s.excluded {
		if o.st == no || s.wild.st == no {
			t.Fatalf("%s: %v excludes %s without effect", what, s, id)
		}
	}
}

func TestSubjectSetOperatorsAreExact(t *testing.T) {
	sets := allSets()
	for _, op := range setOps {
		for _, a := range sets {
			for _, b := range sets {
				got := op.sets(a, b)
				what := fmt.Sprintf("%v %s %v = %v", a, op.name, b, got)
				checkInvariants(t, got, what)
				for _, x := range setUniverse {
					want := op.point(a.member(x), b.member(x))
					if m := got.member(x); m.st != want.st {
						t.Fatalf("%s: %s is %v, want %v", what, x, m, want)
					}
				}
			}
		}
	}
}

// TestSubjectSetNestedIsExact builds random expression trees over the enumerated sets
// and compares each result with the pointwise evaluation of the same tree.
func TestSubjectSetNestedIsExact(t *testing.T) {
	sets := allSets()
	rnd := rand.New(rand.NewPCG(1, 2))
	type tree struct {
		set    *subjectSet
		member func(x string) outcome
		expr   string
	}
	var build func(depth int) tree
	build = func(depth int) tree {
		if depth == 0 || rnd.IntN(4) == 0 {
			s := sets[rnd.IntN(len(sets))]
			return tree{s, s.member, s.String()}
		}
		op := setOps[rnd.IntN(len(setOps))]
		l, r := build(depth-1), build(depth-1)
		if rnd.IntN(3) == 0 {
			c := setOutcomes[1+rnd.IntN(2)]
			l.set = withCaveat(l.set, renamed(c, "rc"))
			lm := l.member
			l.member = func(x string) outcome { return and(renamed(c, "rc"), lm(x)) }
		}
		return tree{
			set:    op.sets(l.set, r.set),
			member: func(x string) outcome { return op.point(l.member(x), r.member(x)) },
			expr:   "(" + l.expr + " " + op.name + " " + r.expr + ")",
		}
	}
	for range 20000 {
		tr := build(4)
		checkInvariants(t, tr.set, tr.expr)
		for _, x := range setUniverse {
			if got, want := tr.set.member(x), tr.member(x); got.st != want.st {
				t.Fatalf("%s = %v: %s is %v, want %v", tr.expr, tr.set, x, got, want)
			}
		}
	}
}

// TestSubjectSetShapes pins the shape of answers (which subjects are listed concretely,
// which as exclusions) to SpiceDB's for sets without caveats.
func TestSubjectSetShapes(t *testing.T) {
	set := func(wild bool, concrete []string, excluded ...string) *subjectSet {
		s := newSubjectSet()
		for _, id := range concrete {
			s.concrete.put(id, outHas)
		}
		if wild {
			s.wild = outHas
			for _, id := range excluded {
				s.excluded.put(id, outHas)
			}
		}
		return s
	}
	all := func(excluded ...string) *subjectSet { return set(true, nil, excluded...) }
	some := func(ids ...string) *subjectSet { return set(false, ids) }
	cases := []struct {
		name      string
		got, want *subjectSet
	}{
		{"* + tom keeps both", unionSets(all(), some("tom")), set(true, []string{"tom"})},
		{"(* - tom) + tom", unionSets(all("tom"), some("tom")), set(true, []string{"tom"})},
		{"(* - tom) + (* - sarah)", unionSets(all("tom"), all("sarah")), all()},
		{"(* - tom,sarah) + (* - sarah)", unionSets(all("tom", "sarah"), all("sarah")), all("sarah")},
		{"* - tom", excludeSets(all(), some("tom")), all("tom")},
		{"* - *", excludeSets(all(), all()), newSubjectSet()},
		{"* - (* - tom)", excludeSets(all(), all("tom")), some("tom")},
		{"(* - sarah) - (* - tom,amy,sarah)", excludeSets(all("sarah"), all("tom", "amy", "sarah")), some("tom", "amy")},
		{"* - (* - (* - u0))", excludeSets(all(), excludeSets(all(), all("u0"))), all("u0")},
		{"{sarah,tom} - *", excludeSets(some("sarah", "tom"), all()), newSubjectSet()},
		{"{sarah,tom} - (* - tom)", excludeSets(some("sarah", "tom"), all("tom")), some("tom")},
		{"tom & *", intersectSets(some("tom"), all()), some("tom")},
		{"tom & (* - tom)", intersectSets(some("tom"), all("tom")), newSubjectSet()},
		{"(* - tom) & (* - sarah)", intersectSets(all("tom"), all("sarah")), all("tom", "sarah")},
		{"{tom,sarah} & {tom}", intersectSets(some("tom", "sarah"), some("tom")), some("tom")},
	}
	for _, c := range cases {
		if !equalSets(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
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
