package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// The reference evaluator answers one (object, relation) at a time by the plain
// definition of each operator, over a slice of relationships, with caveats evaluated
// by Go functions instead of CEL. It is slow and obviously correct; the engine must
// agree with it wherever it gives a definite answer.

type refState int

const (
	refNo refState = iota
	refHas
	refCond
	refErr
)

type refOutcome struct {
	st      refState
	missing []string
}

func refOr(a, b refOutcome) refOutcome {
	switch {
	case a.st == refHas || b.st == refHas:
		return refOutcome{st: refHas}
	case a.st == refErr || b.st == refErr:
		return refOutcome{st: refErr}
	case a.st == refCond || b.st == refCond:
		return refOutcome{st: refCond, missing: union(a.missing, b.missing)}
	}
	return refOutcome{}
}

func refAnd(a, b refOutcome) refOutcome {
	switch {
	case a.st == refNo || b.st == refNo:
		return refOutcome{}
	case a.st == refErr || b.st == refErr:
		return refOutcome{st: refErr}
	case a.st == refCond || b.st == refCond:
		return refOutcome{st: refCond, missing: union(a.missing, b.missing)}
	}
	return refOutcome{st: refHas}
}

func refNot(a refOutcome) refOutcome {
	switch a.st {
	case refHas:
		return refOutcome{}
	case refNo:
		return refOutcome{st: refHas}
	}
	return a
}

func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

type reference struct {
	s       *ir.Schema
	rels    []rel.Relationship
	subject rel.SubjectRef
	ctx     map[string]any
	now     time.Time
	byKey   map[string][]rel.Relationship // live relationships by resource and relation, filled lazily
}

// refCaveats mirrors the CEL caveats of randomSchema.
var refCaveats = map[string]func(ctx map[string]any) refOutcome{
	"over": func(ctx map[string]any) refOutcome {
		x, ok := ctx["x"]
		if !ok {
			return refOutcome{st: refCond, missing: []string{"x"}}
		}
		return boolOutcome(toInt(x) > 5)
	},
	"flagged": func(ctx map[string]any) refOutcome {
		f, ok := ctx["f"]
		if !ok {
			return refOutcome{st: refCond, missing: []string{"f"}}
		}
		return boolOutcome(f.(bool))
	},
}

func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

func boolOutcome(b bool) refOutcome {
	if b {
		return refOutcome{st: refHas}
	}
	return refOutcome{}
}

func (r *reference) caveat(c *rel.Caveat) refOutcome {
	if c == nil {
		return refOutcome{st: refHas}
	}
	merged := map[string]any{}
	for k, v := range r.ctx {
		merged[k] = v
	}
	for k, v := range c.Context {
		merged[k] = v
	}
	return refCaveats[c.Name](merged)
}

func (r *reference) check(typ, relation, id string, depth int) refOutcome {
	if depth <= 0 {
		return refOutcome{st: refErr}
	}
	if r.subject.Object.Type == typ && r.subject.Object.ID == id && r.subject.Relation == relation {
		return refOutcome{st: refHas}
	}
	def := r.s.Definition(typ)
	rl := def.Relation(relation)
	if rl.IsPermission() {
		return r.expr(def, rl.Rewrite, id, depth)
	}
	acc := refOutcome{}
	for _, x := range r.live(typ, id, relation) {
		c := r.caveat(x.Caveat)
		s := x.Subject
		if s.Object.Type == r.subject.Object.Type && (s.Object.ID == rel.Wildcard || (s.Object.ID == r.subject.Object.ID && s.Relation == r.subject.Relation)) {
			acc = refOr(acc, c)
		}
		if s.Relation != "" {
			acc = refOr(acc, refAnd(c, r.check(s.Object.Type, s.Relation, s.Object.ID, depth-1)))
		}
	}
	return acc
}

func (r *reference) live(typ, id, relation string) []rel.Relationship {
	if r.byKey == nil {
		r.byKey = map[string][]rel.Relationship{}
		for _, x := range r.rels {
			if !x.ExpiredAt(r.now) {
				k := x.Resource.Type + ":" + x.Resource.ID + "#" + x.Relation
				r.byKey[k] = append(r.byKey[k], x)
			}
		}
	}
	return r.byKey[typ+":"+id+"#"+relation]
}

func (r *reference) expr(def *ir.Definition, x *ir.Expr, id string, depth int) refOutcome {
	switch x.Kind {
	case ir.Ref:
		return r.check(def.Name, x.Name, id, depth-1)
	case ir.Union:
		acc := refOutcome{}
		for _, c := range x.Children {
			acc = refOr(acc, r.expr(def, c, id, depth))
		}
		return acc
	case ir.Intersection:
		acc := refOutcome{st: refHas}
		for _, c := range x.Children {
			acc = refAnd(acc, r.expr(def, c, id, depth))
		}
		return acc
	case ir.Exclusion:
		return refAnd(r.expr(def, x.Children[0], id, depth), refNot(r.expr(def, x.Children[1], id, depth)))
	case ir.Arrow:
		edges := r.live(def.Name, id, x.Tupleset)
		all := x.ArrowKind == ir.ArrowAll
		acc := refOutcome{}
		if all && len(edges) > 0 {
			acc = refOutcome{st: refHas}
		}
		for _, e := range edges {
			o := refOutcome{}
			if r.s.Definition(e.Subject.Object.Type).Relation(x.Target) != nil {
				o = refAnd(r.caveat(e.Caveat), r.check(e.Subject.Object.Type, x.Target, e.Subject.Object.ID, depth-1))
			} else if !all {
				continue
			}
			if all {
				acc = refAnd(acc, o)
			} else {
				acc = refOr(acc, o)
			}
		}
		return acc
	}
	return refOutcome{}
}

// --- random schemas and data ---

type gen struct {
	rnd  *rand.Rand
	defs []string
	// rels[def] lists relation names; perms[def] permission names.
	rels, perms map[string][]string
	// plain[def] lists relations whose subjects are plain objects (usable as arrow tuplesets).
	plain map[string][]string
	// allowed[def#rel] lists the subject type strings a relation allows.
	allowed map[string][]string
}

func (g *gen) pick(xs []string) string { return xs[g.rnd.IntN(len(xs))] }

// randomSchema builds a schema over user and up to three more definitions. Relations
// allow users (plain, wildcard, caveated, expiring) and other definitions (plain or
// through a relation); permissions nest unions, intersections, exclusions and arrows.
func (g *gen) randomSchema() string {
	g.defs = []string{"user"}
	g.rels, g.perms, g.plain, g.allowed = map[string][]string{}, map[string][]string{}, map[string][]string{}, map[string][]string{}
	n := 2 + g.rnd.IntN(3)
	for i := range n {
		g.defs = append(g.defs, fmt.Sprintf("def%d", i))
	}
	var b strings.Builder
	b.WriteString("use expiration\n\ndefinition user {}\n\n")
	b.WriteString("caveat over(x int) { x > 5 }\n\ncaveat flagged(f bool) { f }\n\n")
	for _, d := range g.defs[1:] {
		nr := 1 + g.rnd.IntN(3)
		for j := range nr {
			name := fmt.Sprintf("rel%d", j)
			g.rels[d] = append(g.rels[d], name)
			var types []string
			isPlain := g.rnd.IntN(3) == 0
			if isPlain {
				types = append(types, g.pick(g.defs))
				g.plain[d] = append(g.plain[d], name)
			} else {
				for range 1 + g.rnd.IntN(3) {
					types = append(types, g.subjectType(d))
				}
			}
			slices.Sort(types)
			types = slices.Compact(types)
			g.allowed[d+"#"+name] = types
		}
		np := 1 + g.rnd.IntN(3)
		for j := range np {
			g.perms[d] = append(g.perms[d], fmt.Sprintf("perm%d", j))
		}
	}
	for _, d := range g.defs[1:] {
		fmt.Fprintf(&b, "definition %s {\n", d)
		for _, r := range g.rels[d] {
			fmt.Fprintf(&b, "\trelation %s: %s\n", r, strings.Join(g.allowed[d+"#"+r], " | "))
		}
		for _, p := range g.perms[d] {
			fmt.Fprintf(&b, "\tpermission %s = %s\n", p, g.expr(d, 2))
		}
		b.WriteString("}\n\n")
	}
	return b.String()
}

func (g *gen) subjectType(self string) string {
	switch g.rnd.IntN(8) {
	case 0:
		return "user:*"
	case 1:
		return "user with over"
	case 2:
		return "user with flagged"
	case 3:
		return "user with expiration"
	case 4:
		// a subject set: another (or the same) definition's first relation
		d := g.pick(g.defs[1:])
		return d + "#rel0"
	default:
		return "user"
	}
}

func (g *gen) expr(d string, depth int) string {
	if depth == 0 || g.rnd.IntN(3) == 0 {
		return g.leaf(d)
	}
	ops := []string{" + ", " & ", " - "}
	return "(" + g.expr(d, depth-1) + g.pick(ops) + g.expr(d, depth-1) + ")"
}

func (g *gen) leaf(d string) string {
	if ts := g.plain[d]; len(ts) > 0 && g.rnd.IntN(3) == 0 {
		t := g.pick(ts)
		target := g.allowed[d+"#"+t][0]
		var names []string
		names = append(names, g.rels[target]...)
		names = append(names, g.perms[target]...)
		if len(names) > 0 {
			name := g.pick(names)
			switch g.rnd.IntN(3) {
			case 0:
				return t + ".all(" + name + ")"
			case 1:
				return t + ".any(" + name + ")"
			}
			return t + "->" + name
		}
	}
	if g.rnd.IntN(4) == 0 && len(g.perms[d]) > 1 {
		return g.pick(g.perms[d]) // may recurse: legal, bounded by the depth limit
	}
	if g.rnd.IntN(12) == 0 {
		return "nil"
	}
	return g.pick(g.rels[d])
}

func (g *gen) object(def string) rel.ObjectRef {
	return rel.ObjectRef{Type: def, ID: fmt.Sprintf("%s%d", def[:1], g.rnd.IntN(4))}
}

func (g *gen) relationships(n int, now time.Time) []rel.Relationship {
	seen := map[rel.Key]bool{}
	var out []rel.Relationship
	for range n {
		d := g.pick(g.defs[1:])
		r := g.pick(g.rels[d])
		t := g.pick(g.allowed[d+"#"+r])
		x := rel.Relationship{Resource: g.object(d), Relation: r}
		base, trait, _ := strings.Cut(t, " with ")
		switch {
		case strings.HasSuffix(base, ":*"):
			x.Subject = rel.SubjectRef{Object: rel.ObjectRef{Type: strings.TrimSuffix(base, ":*"), ID: rel.Wildcard}}
		case strings.Contains(base, "#"):
			typ, sr, _ := strings.Cut(base, "#")
			x.Subject = rel.SubjectRef{Object: g.object(typ), Relation: sr}
		default:
			x.Subject = rel.SubjectRef{Object: g.object(base)}
		}
		switch trait {
		case "over":
			x.Caveat = &rel.Caveat{Name: "over"}
			if g.rnd.IntN(2) == 0 {
				x.Caveat.Context = map[string]any{"x": float64(g.rnd.IntN(10))}
			}
		case "flagged":
			x.Caveat = &rel.Caveat{Name: "flagged"}
		case "expiration":
			exp := now.Add(time.Hour)
			if g.rnd.IntN(2) == 0 {
				exp = now.Add(-time.Hour)
			}
			x.Expiration = &exp
		}
		if !seen[x.Key()] {
			seen[x.Key()] = true
			out = append(out, x)
		}
	}
	return out
}

func (g *gen) context() map[string]any {
	ctx := map[string]any{}
	if g.rnd.IntN(2) == 0 {
		ctx["x"] = float64(g.rnd.IntN(10))
	}
	if g.rnd.IntN(2) == 0 {
		ctx["f"] = g.rnd.IntN(2) == 0
	}
	return ctx
}

// TestEngineAgreesWithReference compares the engine with the reference evaluator, with
// and without the subproblem cache (one per store, as the cache requires; each check is
// asked twice of it, the second time answered from it).
func TestEngineAgreesWithReference(t *testing.T) {
	const schemas, checksPerSchema = 300, 40
	ctx := context.Background()
	eng := engine.New(engine.Config{MaxDepth: 12})
	compared, definite := 0, 0
	for seed := range uint64(schemas) {
		g := &gen{rnd: rand.New(rand.NewPCG(seed, 7))}
		src := g.randomSchema()
		s, err := schema.Compile(src)
		if err != nil {
			// Random arrows can name targets the checker rightly refuses; skip those.
			continue
		}
		now := time.Now()
		rels := g.relationships(10+g.rnd.IntN(30), now)
		st := memory.New(memory.Options{})
		updates := make([]store.Update, len(rels))
		for i, x := range rels {
			updates[i] = store.Update{Op: store.Create, Relationship: x}
		}
		rev, err := st.Write(ctx, nil, updates, nil)
		if err != nil {
			t.Fatalf("seed %d: write: %v", seed, err)
		}
		reader, err := st.Reader(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		cached := engine.New(engine.Config{MaxDepth: 12, Cache: cache.New(1 << 16)})
		for range checksPerSchema {
			d := g.pick(g.defs[1:])
			names := append(slices.Clone(g.rels[d]), g.perms[d]...)
			perm := g.pick(names)
			res := g.object(d)
			subj := rel.SubjectRef{Object: g.object("user")}
			if g.rnd.IntN(5) == 0 {
				sd := g.pick(g.defs[1:])
				subj = rel.SubjectRef{Object: g.object(sd), Relation: g.pick(g.rels[sd])}
			}
			reqCtx := g.context()
			ref := &reference{s: s, rels: rels, subject: subj, ctx: reqCtx, now: now}
			want := ref.check(res.Type, perm, res.ID, 12)
			req := engine.CheckRequest{Resource: res, Permission: perm, Subject: subj, Context: reqCtx}
			compared++
			for i, e := range []*engine.Engine{eng, cached, cached} {
				got, err := e.Check(ctx, s, reader, req)
				if want.st == refErr {
					continue
				}
				if i == 0 {
					definite++
				}
				if err != nil {
					t.Fatalf("seed %d engine %d: %s:%s#%s@%v: engine error %v, reference %v\nschema:\n%s", seed, i, res.Type, res.ID, perm, subj, err, want, src)
				}
				if int(got.Membership) != int(want.st) || !slices.Equal(got.Missing, want.missing) {
					t.Fatalf("seed %d engine %d: %s:%s#%s@%v ctx %v: engine %v %v, reference %v %v\nschema:\n%s\nrels:\n%s",
						seed, i, res.Type, res.ID, perm, subj, reqCtx, got.Membership, got.Missing, want.st, want.missing, src, dump(rels))
				}
			}
		}
		st.Close()
	}
	if definite < schemas*checksPerSchema/3 {
		t.Fatalf("only %d of %d comparisons were definite; the generator needs fixing", definite, compared)
	}
	t.Logf("%d checks compared, %d definite", compared, definite)
}

func dump(rels []rel.Relationship) string {
	var b strings.Builder
	for _, r := range rels {
		b.WriteString(rel.String(r))
		b.WriteByte('\n')
	}
	return b.String()
}
