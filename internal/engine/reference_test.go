package engine_test

import (
	"context"
	"errors"
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
// agree with it wherever it gives a definite answer, and fail where a caveat that
// failed to evaluate decides the answer, naming that caveat.

type refState int

const (
	refNo refState = iota
	refHas
	refCond
	refErr    // cut off by the depth limit
	refCavErr // a caveat (caveat) failed to evaluate
)

type refOutcome struct {
	st      refState
	missing []string
	caveat  string
}

// refUnknown ranks the unknowns of a and b, neither of which decides alone: a depth
// error, then the caveat error of the caveat named first.
func refUnknown(a, b refOutcome) (refOutcome, bool) {
	switch {
	case a.st == refErr || b.st == refErr:
		return refOutcome{st: refErr}, true
	case a.st == refCavErr && b.st == refCavErr:
		return refOutcome{st: refCavErr, caveat: min(a.caveat, b.caveat)}, true
	case a.st == refCavErr:
		return a, true
	case b.st == refCavErr:
		return b, true
	}
	return refOutcome{}, false
}

func refOr(a, b refOutcome) refOutcome {
	if a.st == refHas || b.st == refHas {
		return refOutcome{st: refHas}
	}
	if u, ok := refUnknown(a, b); ok {
		return u
	}
	switch {
	case a.st == refCond || b.st == refCond:
		return refOutcome{st: refCond, missing: union(a.missing, b.missing)}
	}
	return refOutcome{}
}

func refAnd(a, b refOutcome) refOutcome {
	if a.st == refNo || b.st == refNo {
		return refOutcome{}
	}
	if u, ok := refUnknown(a, b); ok {
		return u
	}
	switch {
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
	// memo holds the answers of check by its arguments: a pure function, remembered so
	// that cyclic data does not cost time exponential in the depth.
	memo map[refKey]refOutcome
}

type refKey struct {
	typ, relation, id string
	depth             int
}

// refCaveats mirrors the CEL caveats of enginetest.Gen.Schema. A value of the wrong
// type (a string for x or f, a malformed timestamp for t) fails the caveat.
var refCaveats = map[string]func(ctx map[string]any) refOutcome{
	"over": func(ctx map[string]any) refOutcome {
		x, ok := ctx["x"]
		if !ok {
			return refOutcome{st: refCond, missing: []string{"x"}}
		}
		switch n := x.(type) {
		case int:
			return boolOutcome(n > 5)
		case float64:
			return boolOutcome(n > 5)
		}
		return refOutcome{st: refCavErr, caveat: "over"}
	},
	"flagged": func(ctx map[string]any) refOutcome {
		f, ok := ctx["f"]
		if !ok {
			return refOutcome{st: refCond, missing: []string{"f"}}
		}
		if b, ok := f.(bool); ok {
			return boolOutcome(b)
		}
		return refOutcome{st: refCavErr, caveat: "flagged"}
	},
	"before": func(ctx map[string]any) refOutcome {
		v, ok := ctx["t"]
		if !ok {
			return refOutcome{st: refCond, missing: []string{"t"}}
		}
		t, err := time.Parse(time.RFC3339, v.(string))
		if err != nil {
			return refOutcome{st: refCavErr, caveat: "before"}
		}
		return boolOutcome(t.Before(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	},
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
	k := refKey{typ, relation, id, depth}
	if o, ok := r.memo[k]; ok {
		return o
	}
	if r.memo == nil {
		r.memo = map[refKey]refOutcome{}
	}
	o := r.checkOnce(typ, relation, id, depth)
	r.memo[k] = o
	return o
}

func (r *reference) checkOnce(typ, relation, id string, depth int) refOutcome {
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
// asked twice of it, the second time answered from it), and as one bulk check of every
// request of a schema, which evaluates them in batches and in another order. Request
// contexts fail to convert on purpose now and then (enginetest.Options.CaveatErrors):
// the engine must fail exactly where the reference does, naming the same caveat.
func TestEngineAgreesWithReference(t *testing.T) {
	const schemas, checksPerSchema = 300, 40
	ctx := context.Background()
	eng := engine.New(engine.Config{MaxDepth: 12})
	compared, definite, caveatErrs := 0, 0, 0
	for seed := range uint64(schemas) {
		g := enginetest.New(rand.New(rand.NewPCG(seed, 7)), enginetest.Options{Caveats: true, Expiration: true, CaveatErrors: true})
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
		var reqs []engine.CheckRequest
		var wants []refOutcome
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
			reqs = append(reqs, engine.CheckRequest{Resource: res, Permission: perm, Subject: subj, Context: reqCtx})
			wants = append(wants, ref.check(res.Type, perm, res.ID, 12))
		}
		bulk := eng.CheckBulk(ctx, s, reader, reqs)
		for i, req := range reqs {
			want := wants[i]
			compared++
			if want.st == refErr {
				continue
			}
			definite++
			if want.st == refCavErr {
				caveatErrs++
			}
			for j, e := range []*engine.Engine{eng, cached, cached, nil} {
				var got engine.Result
				var err error
				if e == nil {
					got, err = bulk[i].Result, bulk[i].Err
				} else {
					got, err = e.Check(ctx, s, reader, req)
				}
				if msg := refDiffers(want, got, err); msg != "" {
					t.Fatalf("seed %d engine %d: %s:%s#%s@%v ctx %v: %s\nschema:\n%s\nrels:\n%s",
						seed, j, req.Resource.Type, req.Resource.ID, req.Permission, req.Subject, req.Context, msg, src, enginetest.Dump(rels))
				}
			}
		}
		st.Close()
	}
	if definite < schemas*checksPerSchema/3 || caveatErrs < 50 {
		t.Fatalf("only %d of %d comparisons were definite, %d caveat errors; the generator needs fixing", definite, compared, caveatErrs)
	}
	t.Logf("%d checks compared, %d definite (%d of them caveat errors)", compared, definite, caveatErrs)
}

// refDiffers says how the engine's answer (got, err) differs from the reference's
// want, which is not a depth error; "" when it does not.
func refDiffers(want refOutcome, got engine.Result, err error) string {
	var ce *engine.CaveatEvalError
	switch {
	case want.st == refCavErr && !errors.As(err, &ce):
		return fmt.Sprintf("engine %v %v (error %v), reference: caveat %s fails", got.Membership, got.Missing, err, want.caveat)
	case want.st == refCavErr && ce.Caveat != want.caveat:
		return fmt.Sprintf("engine fails on caveat %s (%v), reference on caveat %s", ce.Caveat, err, want.caveat)
	case want.st == refCavErr:
		return ""
	case err != nil:
		return fmt.Sprintf("engine error %v, reference %v %v", err, want.st, want.missing)
	case int(got.Membership) != int(want.st) || !slices.Equal(got.Missing, want.missing):
		return fmt.Sprintf("engine %v %v, reference %v %v", got.Membership, got.Missing, want.st, want.missing)
	}
	return ""
}
