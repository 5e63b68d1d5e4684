package memory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// TestSortByKey: sortByKey orders relationships as a sort by key does, few or many,
// of one resource type (by resource id, then by key where ids tie) or of several.
func TestSortByKey(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 10, 255, 3000} {
		for _, types := range []int{1, 2} {
			rels := make([]rel.Relationship, n)
			for i := range rels {
				rels[i] = relationship(fmt.Sprint("doc", rnd.IntN(types)), fmt.Sprint("d", rnd.IntN(n/4+1)),
					[]string{"viewer", "editor"}[rnd.IntN(2)], "group", fmt.Sprint("g", rnd.IntN(50)), "member")
			}
			want := slices.Clone(rels)
			slices.SortFunc(want, func(a, b rel.Relationship) int { return store.CompareKeys(a.Key(), b.Key()) })
			sortByKey(rels)
			for i := range rels {
				if rels[i].Key() != want[i].Key() {
					t.Fatalf("%d relationships of %d types: at %d %v, want %v", n, types, i, rels[i].Key(), want[i].Key())
				}
			}
		}
	}
}
