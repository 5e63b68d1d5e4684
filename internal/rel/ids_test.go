package rel

import (
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
