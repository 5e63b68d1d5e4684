package materialize

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// TestAncestorsMatchWalk holds every set's ancestors, merged from its parents' by a
// build and by each revision applied after it, against a walk up from the set (the
// breadth-first ancestors, exact by construction) on random graphs of nested groups
// with cycles, sets of many parents and a chain past 255 hops.
func TestAncestorsMatchWalk(t *testing.T) {
	ctx := context.Background()
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	edge := func(parent, child string) store.Update {
		return store.Update{Op: store.Touch, Relationship: rel.Relationship{
			Resource: rel.ObjectRef{Type: "group", ID: parent}, Relation: "member",
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: child}, Relation: "member"},
		}}
	}
	for seed := range uint64(30) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		groups := 5 + rnd.IntN(60)
		name := func() string { return fmt.Sprint("g", rnd.IntN(groups)) }
		random := func(n int) []store.Update {
			var ups []store.Update
			seen := map[string]bool{}
			for range n {
				u := edge(name(), name())
				if k := u.Relationship.Resource.ID + "/" + u.Relationship.Subject.Object.ID; !seen[k] {
					seen[k] = true
					ups = append(ups, u)
				}
			}
			return ups
		}
		ms := memory.New(memory.Options{GCInterval: -1})
		first := random(groups * (1 + rnd.IntN(3)))
		for i := range 300 {
			first = append(first, edge(fmt.Sprint("c", i), fmt.Sprint("c", i+1)))
		}
		hub := fmt.Sprint("g", rnd.IntN(groups))
		for i := range mergeParentsMax + 4 {
			first = append(first, edge(fmt.Sprint("h", i), hub))
		}
		first = append(first, edge("c300", "g0"))
		rev0, err := ms.Write(ctx, nil, first, nil)
		if err != nil {
			t.Fatal(err)
		}
		x := New(Config{Store: ms, Retain: time.Hour})
		st, err := x.build(ctx, planFor(s), rev0)
		if err != nil {
			t.Fatal(err)
		}
		checkAncestors(t, st, seed)
		last := rev0
		for i := range 10 {
			ups := random(1 + rnd.IntN(6))
			for i := range ups {
				if rnd.IntN(2) == 0 {
					ups[i].Op = store.Delete
				}
			}
			// A member written every time: a revision the watch sends, whatever else.
			ups = append(ups, store.Update{Op: store.Touch, Relationship: rel.Relationship{
				Resource: rel.ObjectRef{Type: "group", ID: name()}, Relation: "member",
				Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("u", i)}},
			}})
			if last, err = ms.Write(ctx, nil, ups, nil); err != nil {
				t.Fatal(err)
			}
		}
		next, stop := iter.Pull2(ms.Watch(ctx, rev0, store.WatchOptions{}))
		for st.applied.Load() < uint64(last) {
			ch, err, ok := next()
			if !ok || err != nil {
				t.Fatalf("watch: %v", err)
			}
			if err := st.apply(ch); err != nil {
				t.Fatal(err)
			}
			checkAncestors(t, st, seed)
		}
		stop()
		ms.Close()
	}
}

// checkAncestors compares every set's ancestors with a walk up from it.
func checkAncestors(t *testing.T, st *state, seed uint64) {
	t.Helper()
	for id := range uint32(st.names.len()) {
		sn := st.setOf(id)
		if sn == nil {
			continue
		}
		got, ok := sn.anc.current()
		if want := st.ancestors(id); !ok || !slices.Equal(got, want) {
			t.Fatalf("seed %d: %s has ancestors %x (%v), a walk up finds %x", seed, st.names.name(id), got, ok, want)
		}
	}
}
