package memory

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// TestSortRun: sortRunLocked orders a reverse chain's records, few or many, as a sort
// by key does, and compareKeys orders any two records as CompareKeys orders their keys.
func TestSortRun(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 10, 255, 3000} {
		s, _ := newTestStore(t, time.Hour)
		rels := map[rel.Key]rel.Relationship{}
		for range n {
			x := relationship("doc", fmt.Sprint("d", rnd.IntN(n/4+1)), "viewer", "group", "g1", []string{"member", "", "admin"}[rnd.IntN(3)])
			rels[x.Key()] = x
		}
		mustWrite(t, s, store.Create, slices.Collect(maps.Values(rels))...)
		var idxs []uint32
		var rids []sym
		for k := range rels {
			idx := s.currentLocked(k)
			idxs, rids = append(idxs, idx), append(rids, s.recs.at(idx).resID)
		}
		want := slices.SortedFunc(maps.Keys(rels), store.CompareKeys)
		s.sortRunLocked(idxs, rids)
		for i, idx := range idxs {
			if k := s.keyLocked(idx); k != want[i] {
				t.Fatalf("%d relationships: at %d %v, want %v", n, i, k, want[i])
			}
		}
	}
	s, _ := newTestStore(t, time.Hour)
	var keys []rel.Key
	for range 200 {
		x := relationship(fmt.Sprint("doc", rnd.IntN(2)), fmt.Sprint("d", rnd.IntN(4)), []string{"viewer", "editor"}[rnd.IntN(2)],
			[]string{"group", "user"}[rnd.IntN(2)], fmt.Sprint("g", rnd.IntN(4)), []string{"member", ""}[rnd.IntN(2)])
		if !slices.Contains(keys, x.Key()) {
			keys = append(keys, x.Key())
			mustWrite(t, s, store.Create, x)
		}
	}
	for _, a := range keys {
		for _, b := range keys {
			if got, want := s.compareKeys(s.currentLocked(a), s.currentLocked(b)), store.CompareKeys(a, b); got != want {
				t.Fatalf("compareKeys(%v, %v) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestAfterLocked: afterLocked places a record after a key as CompareKeys does, where
// resource types and ids differ and where they tie.
func TestAfterLocked(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 9))
	s, _ := newTestStore(t, time.Hour)
	random := func() rel.Relationship {
		return relationship(fmt.Sprint("doc", rnd.IntN(2)), fmt.Sprint("d", rnd.IntN(3)), []string{"viewer", "editor"}[rnd.IntN(2)],
			"group", fmt.Sprint("g", rnd.IntN(3)), []string{"member", ""}[rnd.IntN(2)])
	}
	rels := map[rel.Key]bool{}
	for range 60 {
		rels[random().Key()] = true
	}
	var all []rel.Relationship
	for k := range rels {
		all = append(all, relationship(k.ResourceType, k.ResourceID, k.Relation, k.SubjectType, k.SubjectID, k.SubjectRelation))
	}
	mustWrite(t, s, store.Create, all...)
	for k := range rels {
		idx := s.currentLocked(k)
		for range 20 {
			after := random().Key()
			if got, want := s.afterLocked(idx, &after), store.CompareKeys(k, after) > 0; got != want {
				t.Fatalf("%v after %v: %v, want %v", k, after, got, want)
			}
		}
	}
}
