package rel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortIDs: SortIDs orders ids as slices.Sort does, on both sides of the size at
// which it switches to numeric prefixes, with ids shorter and longer than eight
// bytes, many whose first eight tie, ids that are prefixes of others, NUL and high
// bytes, and repeats.
func TestSortIDs(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 'a', 'b', 'u', '0', '9', 0xff}
	for _, n := range []int{0, 1, 255, 256, 2000} {
		ids := make([]string, n)
		for i := range ids {
			b := make([]byte, rnd.IntN(12))
			for j := range b {
				b[j] = alphabet[rnd.IntN(len(alphabet))]
			}
			ids[i] = string(b)
		}
		if n == 2000 {
			// Ids whose first eight bytes tie, as long ids of one kind do.
			for i := range ids[:n/2] {
				ids[i] = "document" + ids[i]
			}
		}
		want := slices.Clone(ids)
		slices.Sort(want)
		SortIDs(ids)
		if !slices.Equal(ids, want) {
			t.Fatalf("%d ids: SortIDs gave %q, want %q", n, ids, want)
		}
	}
}

// TestOrder: order orders positions by id, then by the tie-break where ids are equal.
func TestOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	type item struct {
		id   string
		rank int
	}
	for _, n := range []int{0, 1, 30, 3000} {
		items := make([]item, n)
		for i := range items {
			items[i] = item{fmt.Sprintf("document%d", rnd.IntN(n/3+1)), rnd.IntN(5)}
		}
		got := order(n, func(i int) string { return items[i].id }, func(a, b int) int { return items[a].rank - items[b].rank })
		for i := 1; i < len(got); i++ {
			a, b := items[got[i-1]], items[got[i]]
			if a.id > b.id || a.id == b.id && a.rank > b.rank {
				t.Fatalf("%d items: %v before %v", n, a, b)
			}
		}
		seen := map[uint32]bool{}
		for _, at := range got {
			seen[at] = true
		}
		if len(seen) != n {
			t.Fatalf("%d items: %d distinct positions", n, len(seen))
		}
	}
}
