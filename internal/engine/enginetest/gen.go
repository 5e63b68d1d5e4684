// Package enginetest generates random schemas and relationships for the tests that hold
// the engine against something simpler or independent: the reference evaluator, the
// engine's own checks, and SpiceDB. Only tests import it.
package enginetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/latch-authz/latch/internal/rel"
)

// Options choose what random schemas use. Comparisons with SpiceDB leave out caveats
// and expiration (SpiceDB 1.56 answers some of those cases wrongly, issue 16; they are
// held against the reference evaluator instead) and ask for acyclic permissions.
type Options struct {
	Caveats    bool // relations allow `user with over` and `user with flagged`
	Expiration bool // relations allow `user with expiration`
	// NoWildcards keeps `user:*` out of type lists.
	NoWildcards bool
	// Acyclic keeps a definition's permissions from naming each other in a cycle
	// (`perm0 = perm1`, `perm1 = perm0 + rel0`) and relationships from forming one.
	// Cycles are legal, but SpiceDB follows them to its depth limit, at a cost
	// exponential in that limit, and ends in an error rather than an answer to compare.
	Acyclic bool
	// CaveatErrors (with Caveats) adds `caveat before(t timestamp)` and request contexts
	// whose values fail to convert on purpose: a malformed timestamp, a string for an
	// int or a bool.
	CaveatErrors bool
	// Nested makes every definition's first relation admit its own subject set
	// (`relation rel0: ... | def0#rel0`, nested groups), besides what it draws.
	Nested bool
	// Chains gives every definition a relation `parent` of objects of its own type, which
	// its first permission follows back into itself (`perm0 = ... + parent->perm0`, folders
	// in folders).
	Chains bool
}

// AllTraits uses every trait the generator knows.
var AllTraits = Options{Caveats: true, Expiration: true}

// Gen builds one random schema and data for it; the fields describe the last schema.
type Gen struct {
	Rnd  *rand.Rand
	Opts Options
	// Defs lists the definitions, user first.
	Defs []string
	// Rels[def] lists relation names; Perms[def] permission names.
	Rels, Perms map[string][]string
	// Plain[def] lists relations whose subjects are plain objects (usable as arrow tuplesets).
	Plain map[string][]string
	// Allowed[def#rel] lists the subject type strings a relation allows.
	Allowed map[string][]string
}

// New returns a generator drawing from rnd.
func New(rnd *rand.Rand, opts Options) *Gen { return &Gen{Rnd: rnd, Opts: opts} }

// Pick returns a random element of xs.
func (g *Gen) Pick(xs []string) string { return xs[g.Rnd.IntN(len(xs))] }

// Names lists a definition's relations, then its permissions.
func (g *Gen) Names(def string) []string {
	return append(slices.Clone(g.Rels[def]), g.Perms[def]...)
}

// Schema builds a schema over user and two to four more definitions. Relations allow
// users (plain, wildcard and the chosen traits) and subject sets on any definition's
// relations and permissions, its own included; permissions nest unions, intersections,
// exclusions and arrows, and some merely alias another name.
func (g *Gen) Schema() string {
	g.Defs = []string{"user"}
	g.Rels, g.Perms, g.Plain, g.Allowed = map[string][]string{}, map[string][]string{}, map[string][]string{}, map[string][]string{}
	for i := range 2 + g.Rnd.IntN(3) {
		d := fmt.Sprintf("def%d", i)
		g.Defs = append(g.Defs, d)
		for j := range 1 + g.Rnd.IntN(3) {
			g.Rels[d] = append(g.Rels[d], fmt.Sprintf("rel%d", j))
		}
		for j := range 1 + g.Rnd.IntN(3) {
			g.Perms[d] = append(g.Perms[d], fmt.Sprintf("perm%d", j))
		}
	}
	// Subject types are drawn once every name is known, so that a relation can allow a
	// subject set on a permission of a definition written after it, or of its own.
	for _, d := range g.Defs[1:] {
		for _, r := range g.Rels[d] {
			var types []string
			if g.Rnd.IntN(3) == 0 {
				types = append(types, g.Pick(g.Defs))
				g.Plain[d] = append(g.Plain[d], r)
			} else {
				for range 1 + g.Rnd.IntN(3) {
					types = append(types, g.subjectType(d))
				}
			}
			if g.Opts.Nested && r == g.Rels[d][0] {
				types = append(types, d+"#"+r)
			}
			slices.Sort(types)
			g.Allowed[d+"#"+r] = slices.Compact(types)
		}
		if g.Opts.Chains {
			types := []string{d}
			if g.Opts.Expiration && g.Rnd.IntN(4) == 0 {
				types = append(types, d+" with expiration")
			}
			if g.Opts.Caveats && g.Rnd.IntN(4) == 0 {
				types = append(types, d+" with flagged")
			}
			g.Rels[d] = append(g.Rels[d], "parent")
			g.Plain[d] = append(g.Plain[d], "parent")
			g.Allowed[d+"#parent"] = types
		}
	}
	return g.write()
}

func (g *Gen) write() string {
	var b strings.Builder
	if g.Opts.Expiration {
		b.WriteString("use expiration\n\n")
	}
	b.WriteString("definition user {}\n\n")
	if g.Opts.Caveats {
		b.WriteString("caveat over(x int) { x > 5 }\n\ncaveat flagged(f bool) { f }\n\n")
		if g.Opts.CaveatErrors {
			b.WriteString("caveat before(t timestamp) { t < timestamp(\"2030-01-01T00:00:00Z\") }\n\n")
		}
	}
	for _, d := range g.Defs[1:] {
		fmt.Fprintf(&b, "definition %s {\n", d)
		for _, r := range g.Rels[d] {
			fmt.Fprintf(&b, "\trelation %s: %s\n", r, strings.Join(g.Allowed[d+"#"+r], " | "))
		}
		for i, p := range g.Perms[d] {
			x := g.permission(d, p)
			if g.Opts.Chains && i == 0 {
				x += " + parent->" + p
			}
			fmt.Fprintf(&b, "\tpermission %s = %s\n", p, x)
		}
		b.WriteString("}\n\n")
	}
	return b.String()
}

func (g *Gen) subjectType(self string) string {
	var traits []string
	if g.Opts.Caveats {
		traits = append(traits, "user with over", "user with flagged")
		if g.Opts.CaveatErrors {
			traits = append(traits, "user with before")
		}
	}
	if g.Opts.Expiration {
		traits = append(traits, "user with expiration")
	}
	n := g.Rnd.IntN(8 + len(traits))
	switch {
	case n < 2 && !g.Opts.NoWildcards:
		return "user:*"
	case n < 4:
		// a subject set on a relation or permission, often of the relation's own definition
		d := self
		if g.Rnd.IntN(2) == 0 {
			d = g.Pick(g.Defs[1:])
		}
		return d + "#" + g.Pick(g.Names(d))
	case n >= 8:
		return traits[n-8]
	}
	return "user"
}

// permission is the expression of permission p on d: a nest of operators, or one name.
func (g *Gen) permission(d, p string) string {
	if g.Rnd.IntN(6) == 0 {
		// an alias of another permission or a relation (`permission admin = read`)
		names := append(slices.Clone(g.Rels[d]), g.namable(d, p)...)
		return g.Pick(slices.DeleteFunc(names, func(n string) bool { return n == p }))
	}
	return g.expr(d, p, 2)
}

// namable lists the permissions of d that p's expression may name: all of them, or
// with Acyclic, only those written before p.
func (g *Gen) namable(d, p string) []string {
	if g.Opts.Acyclic {
		return g.Perms[d][:slices.Index(g.Perms[d], p)]
	}
	return g.Perms[d]
}

func (g *Gen) expr(d, p string, depth int) string {
	if depth == 0 || g.Rnd.IntN(3) == 0 {
		return g.leaf(d, p)
	}
	ops := []string{" + ", " & ", " - "}
	return "(" + g.expr(d, p, depth-1) + g.Pick(ops) + g.expr(d, p, depth-1) + ")"
}

func (g *Gen) leaf(d, p string) string {
	if ts := g.Plain[d]; len(ts) > 0 && g.Rnd.IntN(3) == 0 {
		t := g.Pick(ts)
		if names := g.Names(g.Allowed[d+"#"+t][0]); len(names) > 0 {
			name := g.Pick(names)
			switch g.Rnd.IntN(3) {
			case 0:
				return t + ".all(" + name + ")"
			case 1:
				return t + ".any(" + name + ")"
			}
			return t + "->" + name
		}
	}
	if perms := g.namable(d, p); g.Rnd.IntN(4) == 0 && len(perms) > 0 {
		return g.Pick(perms) // may recurse: legal, bounded by the depth limit
	}
	if g.Rnd.IntN(12) == 0 {
		return "nil"
	}
	return g.Pick(g.Rels[d])
}

// IDs lists the object ids the generator uses for a definition.
func IDs(def string) []string {
	return []string{def[:1] + "0", def[:1] + "1", def[:1] + "2", def[:1] + "3"}
}

// Object returns a random object of def.
func (g *Gen) Object(def string) rel.ObjectRef {
	ids := IDs(def)
	return rel.ObjectRef{Type: def, ID: ids[g.Rnd.IntN(len(ids))]}
}

// SubjectSet returns a random subject set on a relation or permission of any
// definition but user.
func (g *Gen) SubjectSet() rel.SubjectRef {
	d := g.Pick(g.Defs[1:])
	return rel.SubjectRef{Object: g.Object(d), Relation: g.Pick(g.Names(d))}
}

// Relationships returns up to n distinct relationships the schema allows; expiring
// ones expire an hour before or after now. With Acyclic, no object reaches itself
// through them: SpiceDB answers a cycle only with its depth error, and searching to
// that depth can cost it seconds and gigabytes.
func (g *Gen) Relationships(n int, now time.Time) []rel.Relationship {
	seen := map[rel.Key]bool{}
	var out []rel.Relationship
	rank := g.ranks()
	for range n {
		d := g.Pick(g.Defs[1:])
		r := g.Pick(g.Rels[d])
		x := rel.Relationship{Resource: g.Object(d), Relation: r}
		base, trait, _ := strings.Cut(g.Pick(g.Allowed[d+"#"+r]), " with ")
		switch {
		case strings.HasSuffix(base, ":*"):
			x.Subject = rel.SubjectRef{Object: rel.ObjectRef{Type: strings.TrimSuffix(base, ":*"), ID: rel.Wildcard}}
		case strings.Contains(base, "#"):
			typ, sr, _ := strings.Cut(base, "#")
			x.Subject = rel.SubjectRef{Object: g.Object(typ), Relation: sr}
		default:
			x.Subject = rel.SubjectRef{Object: g.Object(base)}
		}
		g.trait(&x, trait, now)
		if r, ok := rank[x.Subject.Object]; ok && r >= rank[x.Resource] {
			continue
		}
		if !seen[x.Key()] {
			seen[x.Key()] = true
			out = append(out, x)
		}
	}
	return out
}

// ranks orders the objects of every definition but user at random, for Acyclic: a
// relationship's subject must rank below its resource. Without Acyclic it is empty.
func (g *Gen) ranks() map[rel.ObjectRef]int {
	rank := map[rel.ObjectRef]int{}
	if !g.Opts.Acyclic {
		return rank
	}
	var objs []rel.ObjectRef
	for _, d := range g.Defs[1:] {
		for _, id := range IDs(d) {
			objs = append(objs, rel.ObjectRef{Type: d, ID: id})
		}
	}
	for i, r := range g.Rnd.Perm(len(objs)) {
		rank[objs[i]] = r
	}
	return rank
}

func (g *Gen) trait(x *rel.Relationship, trait string, now time.Time) {
	switch trait {
	case "over":
		x.Caveat = &rel.Caveat{Name: "over"}
		if g.Rnd.IntN(2) == 0 {
			x.Caveat.Context = map[string]any{"x": float64(g.Rnd.IntN(10))}
		}
	case "flagged":
		x.Caveat = &rel.Caveat{Name: "flagged"}
	case "before":
		x.Caveat = &rel.Caveat{Name: "before"}
	case "expiration":
		exp := now.Add(time.Hour)
		if g.Rnd.IntN(2) == 0 {
			exp = now.Add(-time.Hour)
		}
		x.Expiration = &exp
	}
}

// Context returns a random request context for the caveats: x, f, both or neither;
// with CaveatErrors, also t, and each value may be one that fails to convert.
func (g *Gen) Context() map[string]any {
	ctx := map[string]any{}
	if g.Rnd.IntN(2) == 0 {
		ctx["x"] = float64(g.Rnd.IntN(10))
	}
	if g.Rnd.IntN(2) == 0 {
		ctx["f"] = g.Rnd.IntN(2) == 0
	}
	if !g.Opts.CaveatErrors {
		return ctx
	}
	if g.Rnd.IntN(3) == 0 {
		ctx["x"] = "seven"
	}
	if g.Rnd.IntN(3) == 0 {
		ctx["f"] = "yes"
	}
	// Before 2030, after it, malformed (no seconds), or absent.
	if t := g.Pick([]string{"2023-10-11T10:00:00Z", "2031-01-01T00:00:00Z", "2023-10-11T11:00.000Z", ""}); t != "" {
		ctx["t"] = t
	}
	return ctx
}

// Dump lists relationships one a line, in the relationship syntax.
func Dump(rels []rel.Relationship) string {
	var b strings.Builder
	for _, r := range rels {
		b.WriteString(rel.String(r))
		b.WriteByte('\n')
	}
	return b.String()
}
