package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/engine/enginetest"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
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

// refCaveats mirrors the CEL caveats of enginetest.Gen.Schema.
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

// TestEngineAgreesWithReference compares the engine with the reference evaluator, with
// and without the subproblem cache (one per store, as the cache requires; each check is
// asked twice of it, the second time answered from it).
func TestEngineAgreesWithReference(t *testing.T) {
	const schemas, checksPerSchema = 300, 40
	ctx := context.Background()
	eng := engine.New(engine.Config{MaxDepth: 12})
	compared, definite := 0, 0
	for seed := range uint64(schemas) {
		g := enginetest.New(rand.New(rand.NewPCG(seed, 7)), enginetest.AllTraits)
		src := g.Schema()
		s, err := schema.Compile(src)
		if err != nil {
			// Random arrows can name targets the checker rightly refuses; skip those.
			continue
		}
		now := time.Now()
		rels := g.Relationships(10+g.Rnd.IntN(30), now)
		st, reader := memoryReader(t, rels)
		cached := engine.New(engine.Config{MaxDepth: 12, Cache: cache.New(1 << 16)})
		for range checksPerSchema {
			d := g.Pick(g.Defs[1:])
			names := append(slices.Clone(g.Rels[d]), g.Perms[d]...)
			perm := g.Pick(names)
			res := g.Object(d)
			subj := rel.SubjectRef{Object: g.Object("user")}
			if g.Rnd.IntN(5) == 0 {
				subj = g.SubjectSet()
			}
			reqCtx := g.Context()
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
						seed, i, res.Type, res.ID, perm, subj, reqCtx, got.Membership, got.Missing, want.st, want.missing, src, enginetest.Dump(rels))
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
