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

// TestSortByKey: sortByKeyLocked orders records as a sort by key does, few or many,
// of one resource type (by resource id, then by key where ids tie) or of several.
func TestSortByKey(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 10, 255, 3000} {
		for _, types := range []int{1, 2} {
			s, _ := newTestStore(t, time.Hour)
			rels := map[rel.Key]rel.Relationship{}
			for range n {
				x := relationship(fmt.Sprint("doc", rnd.IntN(types)), fmt.Sprint("d", rnd.IntN(n/4+1)),
					[]string{"viewer", "editor"}[rnd.IntN(2)], "group", fmt.Sprint("g", rnd.IntN(50)), "member")
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
			s.sortByKeyLocked(idxs, rids, types == 1)
			for i, idx := range idxs {
				if k := s.keyLocked(idx); k != want[i] {
					t.Fatalf("%d relationships of %d types: at %d %v, want %v", n, types, i, k, want[i])
				}
			}
		}
	}
}
