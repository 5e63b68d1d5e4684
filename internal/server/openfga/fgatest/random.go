package fgatest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Case is one random model, its tuples and the requests to ask of it.
type Case struct {
	Model  string  // OpenFGA's DSL
	Tuples []Tuple // written before asking
	Checks []Query
	Lists  []Query // ListObjects: Object holds the type
	Users  []Query // ListUsers: User holds the filter ("user", "t0#r1")
}

// Query is one Check or ListObjects request.
type Query struct {
	Object, Relation, User string
	Contextual             []Tuple
	Context                map[string]any
}

func (q Query) String() string {
	s := q.Object + "#" + q.Relation + "@" + q.User
	if len(q.Contextual) > 0 {
		s += fmt.Sprintf(" contextual %v", q.Contextual)
	}
	if q.Context != nil {
		s += fmt.Sprintf(" context %v", q.Context)
	}
	return s
}

// relation is a generated relation: its name and, when it has direct type
// restrictions, what they admit ("user", "user:*", "t1#r0", "user with small").
type relation struct {
	name   string
	direct []string
	plain  bool // only plain object types, no conditions: usable as the y of `x from y`
}

// gen draws one Case.
type gen struct {
	rnd   *rand.Rand
	types []string              // object types besides user
	rels  map[string][]relation // relations by type
}

// conditions are the model's conditions; tuples name them, requests bring their
// parameters or leave them out (an error in OpenFGA).
const conditions = `
condition small(x: int) {
  x < 10
}

condition flag(on: bool) {
  on
}
`

const (
	objectsPerType = 3
	usersInData    = 3
)

// RandomCase draws a model of two or three object types of two to four relations each,
// built from direct type restrictions (users, wildcards, usersets, conditions),
// computed usersets, `x from y`, `or`, `and` and `but not`, where relations may name
// each other in cycles, with tuples over a few ids, and the checks and list-objects
// requests that cover it.
func RandomCase(rnd *rand.Rand) Case {
	g := &gen{rnd: rnd, rels: map[string][]relation{}}
	for i := range 2 + rnd.IntN(2) {
		g.types = append(g.types, fmt.Sprintf("t%d", i))
	}
	for _, typ := range g.types {
		for i := range 2 + rnd.IntN(3) {
			r := relation{name: fmt.Sprintf("r%d", i)}
			switch {
			case i == 0: // every type's first relation admits users: an entry point
				r.direct = g.restrictions(g.pick(userRestrictions))
			case i == 1 && rnd.IntN(2) == 0:
				r.direct, r.plain = g.tupleset(), true
			case rnd.IntN(2) == 0:
				r.direct = g.restrictions("")
			}
			g.rels[typ] = append(g.rels[typ], r)
		}
	}
	var b strings.Builder
	b.WriteString("model\n  schema 1.1\n\ntype user\n")
	for _, typ := range g.types {
		fmt.Fprintf(&b, "\ntype %s\n  relations\n", typ)
		for i, r := range g.rels[typ] {
			fmt.Fprintf(&b, "    define %s: %s\n", r.name, g.definition(typ, r, i))
		}
	}
	b.WriteString(conditions)
	c := Case{Model: b.String(), Tuples: g.tuples(8 + rnd.IntN(16))}
	c.Checks, c.Lists, c.Users = g.queries()
	return c
}

// userRestrictions are the type restrictions that admit users directly.
var userRestrictions = []string{"user", "user:*", "user with small", "user with flag", "user:* with small"}

// restrictions draws a relation's direct type restrictions, first (when not "") among
// them.
func (g *gen) restrictions(first string) []string {
	all := slices.Clone(userRestrictions)
	for _, t := range g.types { // every type has r0 and r1
		all = append(all, t, t+"#r0", t+"#r1")
	}
	var out []string
	if first != "" {
		out = append(out, first)
	}
	for range 1 + g.rnd.IntN(2) {
		if s := g.pick(all); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// tupleset draws the type restrictions of a relation `x from y` may use as its y:
// one or two object types.
func (g *gen) tupleset() []string {
	out := []string{g.pick(g.types)}
	if s := g.pick(g.types); g.rnd.IntN(2) == 0 && s != out[0] {
		out = append(out, s)
	}
	return out
}

// definition draws the rewrite of relation r of typ. A relation that `x from y` may
// use as its y is its direct type restrictions alone (OpenFGA requires it), and a
// computed userset names an earlier relation of the type only (OpenFGA refuses a model
// whose relations are defined in terms of each other without a tuple between them);
// cycles go through usersets and `x from y`, as OpenFGA allows.
func (g *gen) definition(typ string, r relation, index int) string {
	direct := "[" + strings.Join(r.direct, ", ") + "]"
	if r.plain {
		return direct
	}
	var terms []string
	if r.direct != nil {
		terms = append(terms, direct)
	}
	earlier := g.names(typ)[:index]
	n := g.rnd.IntN(3)
	if r.direct == nil {
		n++
	}
	for range n {
		if t := g.term(typ, earlier); t != "" && !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return "[user]"
	}
	if len(terms) == 1 {
		return terms[0]
	}
	switch g.rnd.IntN(4) {
	case 0:
		return strings.Join(terms, " and ")
	case 1:
		return "(" + strings.Join(terms[:len(terms)-1], " or ") + ") but not " + terms[len(terms)-1]
	default:
		return strings.Join(terms, " or ")
	}
}

// term draws a computed userset of one of earlier or a `x from y` over a plain
// relation of typ.
func (g *gen) term(typ string, earlier []string) string {
	var tuplesets []relation
	for _, r := range g.rels[typ] {
		if r.plain {
			tuplesets = append(tuplesets, r)
		}
	}
	if len(tuplesets) > 0 && g.rnd.IntN(2) == 0 {
		ts := tuplesets[g.rnd.IntN(len(tuplesets))]
		names := []string{"r0", "r1"} // on every type
		if len(ts.direct) == 1 {
			names = g.names(ts.direct[0])
		}
		return g.pick(names) + " from " + ts.name
	}
	if len(earlier) == 0 {
		return ""
	}
	return g.pick(earlier)
}

func (g *gen) names(typ string) []string {
	var out []string
	for _, r := range g.rels[typ] {
		out = append(out, r.name)
	}
	return out
}

// tuples draws n tuples, each admitted by its relation's type restrictions.
func (g *gen) tuples(n int) []Tuple {
	var out []Tuple
	seen := map[string]bool{}
	for range n {
		t, ok := g.tuple()
		key := t.Object + "#" + t.Relation + "@" + t.User
		if ok && !seen[key] {
			seen[key] = true
			out = append(out, t)
		}
	}
	return out
}

func (g *gen) tuple() (Tuple, bool) {
	typ := g.pick(g.types)
	var direct []relation
	for _, r := range g.rels[typ] {
		if r.direct != nil {
			direct = append(direct, r)
		}
	}
	r := direct[g.rnd.IntN(len(direct))]
	restriction := g.pick(r.direct)
	subject, cond, _ := strings.Cut(restriction, " with ")
	t := Tuple{Object: g.object(typ), Relation: r.name}
	switch {
	case strings.HasSuffix(subject, ":*"):
		t.User = subject
	case strings.Contains(subject, "#"):
		st, rel, _ := strings.Cut(subject, "#")
		if !slices.Contains(g.names(st), rel) {
			return t, false
		}
		t.User = g.object(st) + "#" + rel
		if t.User == t.Object+"#"+t.Relation {
			return t, false // OpenFGA refuses a tuple that says what is implicit
		}
	default:
		t.User = g.object(subject)
	}
	if cond != "" {
		t.Condition = &Condition{Name: cond}
		// Half the conditioned tuples fix their parameter, the rest leave it to the
		// request.
		if g.rnd.IntN(2) == 0 {
			t.Condition.Context = g.conditionContext(cond)
		}
	}
	return t, true
}

func (g *gen) conditionContext(cond string) map[string]any {
	if cond == "small" {
		return map[string]any{"x": g.rnd.IntN(20)}
	}
	return map[string]any{"on": g.rnd.IntN(2) == 0}
}

func (g *gen) object(typ string) string {
	n := objectsPerType
	if typ == "user" {
		n = usersInData
	}
	return fmt.Sprintf("%s:%d", typ, g.rnd.IntN(n))
}

// queries draws checks of every object and relation for some users, list-objects of
// every type and relation, and list-users of every object and relation, each with a
// random request context and now and then a contextual tuple.
func (g *gen) queries() (checks, lists, users []Query) {
	subjects := []string{"user:0", "user:1", "user:2", "user:9", "user:*"}
	for _, typ := range g.types {
		for _, r := range g.rels[typ] {
			for i := range objectsPerType {
				object := fmt.Sprintf("%s:%d", typ, i)
				for range 2 {
					checks = append(checks, g.query(object, r.name, g.user(subjects)))
				}
				users = append(users, g.query(object, r.name, g.filter()))
			}
			for _, u := range subjects {
				lists = append(lists, g.query(typ, r.name, u))
			}
		}
	}
	return checks, lists, users
}

// filter draws a list-users filter: mostly users, sometimes an object type or a
// userset.
func (g *gen) filter() string {
	switch typ := g.pick(g.types); g.rnd.IntN(6) {
	case 0:
		return typ
	case 1:
		return typ + "#" + g.pick([]string{"r0", "r1"})
	default:
		return "user"
	}
}

// user draws a request's user: mostly users, sometimes a userset of another type.
func (g *gen) user(users []string) string {
	if g.rnd.IntN(5) > 0 {
		return g.pick(users)
	}
	typ := g.pick(g.types)
	return g.object(typ) + "#" + g.pick(g.names(typ))
}

func (g *gen) query(object, relation, user string) Query {
	q := Query{Object: object, Relation: relation, User: user}
	switch g.rnd.IntN(4) {
	case 0, 1:
		q.Context = map[string]any{"x": g.rnd.IntN(20), "on": g.rnd.IntN(2) == 0}
	case 2:
		q.Context = g.conditionContext(g.pick([]string{"small", "flag"}))
	}
	if g.rnd.IntN(5) == 0 {
		if t, ok := g.tuple(); ok {
			q.Contextual = []Tuple{t}
		}
	}
	return q
}

func (g *gen) pick(xs []string) string { return xs[g.rnd.IntN(len(xs))] }
