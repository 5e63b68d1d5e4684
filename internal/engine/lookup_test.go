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
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// TestLookupsAgreeWithCheck runs LookupResources and LookupSubjects on random schemas
// and data and holds every definite check against them: a granted (or conditional)
// resource or subject is listed with that answer, a denied one is not.
func TestLookupsAgreeWithCheck(t *testing.T) {
	const schemas = 200
	ctx := context.Background()
	eng := engine.New(engine.Config{MaxDepth: 12})
	compared := 0
	for seed := range uint64(schemas) {
		g := enginetest.New(rand.New(rand.NewPCG(seed, 11)), enginetest.AllTraits)
		src := g.Schema()
		s, err := schema.Compile(src)
		if err != nil {
			continue
		}
		rels := g.Relationships(10+g.Rnd.IntN(30), time.Now())
		st := memory.New(memory.Options{})
		updates := make([]store.Update, len(rels))
		for i, x := range rels {
			updates[i] = store.Update{Op: store.Create, Relationship: x}
		}
		rev, err := st.Write(ctx, nil, updates, nil)
		if err != nil {
			t.Fatal(err)
		}
		reader, _ := st.Reader(ctx, rev)
		// Lookups run on an engine with a subproblem cache (one per store, as the cache
		// requires), checks on one without.
		cached := engine.New(engine.Config{MaxDepth: 12, Cache: cache.New(1 << 16)})
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: %s\nschema:\n%s\nrels:\n%s", seed, fmt.Sprintf(format, args...), src, enginetest.Dump(rels))
		}
		for _, d := range g.Defs[1:] {
			for _, perm := range append(slices.Clone(g.Rels[d]), g.Perms[d]...) {
				reqCtx := g.Context()
				// LookupResources for each user subject against a check of every object.
				for u := range 4 {
					subj := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprintf("u%d", u)}}
					found := map[string]engine.Result{}
					err := cached.LookupResources(ctx, s, reader, engine.LookupResourcesRequest{ResourceType: d, Permission: perm, Subject: subj, Context: reqCtx},
						func(f engine.FoundResource) error {
							if _, dup := found[f.ID]; dup {
								fail("LookupResources %s#%s@%v yielded %s twice", d, perm, subj, f.ID)
							}
							found[f.ID] = f.Result
							return nil
						})
					if errors.Is(err, engine.ErrMaxDepth) {
						continue
					}
					if err != nil {
						fail("LookupResources: %v", err)
					}
					for i := range 4 {
						res := rel.ObjectRef{Type: d, ID: fmt.Sprintf("%s%d", d[:1], i)}
						want, err := eng.Check(ctx, s, reader, engine.CheckRequest{Resource: res, Permission: perm, Subject: subj, Context: reqCtx})
						if err != nil {
							continue
						}
						compared++
						got, ok := found[res.ID]
						if want.Membership == engine.NoPermission {
							if ok {
								fail("LookupResources %s#%s@%v ctx %v lists %s (%v) but check denies", d, perm, subj, reqCtx, res.ID, got)
							}
							continue
						}
						if !ok || got.Membership != want.Membership {
							fail("LookupResources %s#%s@%v ctx %v: %s is %v (listed %v), check says %v", d, perm, subj, reqCtx, res.ID, got, ok, want)
						}
					}
				}
				// LookupSubjects on each object against a check of every user.
				for i := range 4 {
					res := rel.ObjectRef{Type: d, ID: fmt.Sprintf("%s%d", d[:1], i)}
					concrete := map[string]engine.Result{}
					var wild *engine.FoundSubject
					err := eng.LookupSubjects(ctx, s, reader, engine.LookupSubjectsRequest{Resource: res, Permission: perm, SubjectType: "user", Context: reqCtx},
						func(f engine.FoundSubject) error {
							if f.ID == rel.Wildcard {
								wild = &f
							} else {
								concrete[f.ID] = f.Result
							}
							return nil
						})
					if errors.Is(err, engine.ErrMaxDepth) {
						continue
					}
					if err != nil {
						fail("LookupSubjects: %v", err)
					}
					for _, uid := range []string{"u0", "u1", "u2", "u3", "unseen"} {
						subj := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: uid}}
						want, err := eng.Check(ctx, s, reader, engine.CheckRequest{Resource: res, Permission: perm, Subject: subj, Context: reqCtx})
						if err != nil {
							continue
						}
						compared++
						got := lsMembership(concrete, wild, uid)
						if got != want.Membership {
							fail("LookupSubjects %v#%s ctx %v: user %s is %v, check says %v (concrete %v, wildcard %+v)", res, perm, reqCtx, uid, got, want.Membership, concrete, wild)
						}
					}
				}
			}
		}
		st.Close()
	}
	if compared < 1000 {
		t.Fatalf("only %d comparisons; the generator needs fixing", compared)
	}
	t.Logf("%d lookup answers compared with checks", compared)
}

// lsMembership reads a subject's answer off LookupSubjects results: its concrete entry,
// else the wildcard's unless the wildcard excludes it.
func lsMembership(concrete map[string]engine.Result, wild *engine.FoundSubject, id string) engine.Membership {
	if r, ok := concrete[id]; ok && r.Membership == engine.HasPermission {
		return r.Membership
	}
	m := engine.NoPermission
	if r, ok := concrete[id]; ok {
		m = r.Membership
	}
	if wild == nil {
		return m
	}
	wm := wild.Result.Membership
	for _, ex := range wild.Excluded {
		if ex.ID == id {
			switch ex.Result.Membership {
			case engine.HasPermission:
				wm = engine.NoPermission
			case engine.Conditional:
				if wm == engine.HasPermission {
					wm = engine.Conditional
				}
			}
		}
	}
	if wm == engine.HasPermission || m == engine.NoPermission {
		return wm
	}
	return m
}
