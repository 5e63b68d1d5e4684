package materialize

import (
	"testing"

	"github.com/latch-authz/latch/internal/store"
)

// TestDropSharesTombstone: a dropped slot takes its state's shared tombstone, whether
// it was first written at the state's first revision or has versions since, and frees
// every version it held: reads at each of their revisions and after have no answer,
// and pruning the chain frees nothing more and leaves the tombstone as it was.
func TestDropSharesTombstone(t *testing.T) {
	tomb := &version[[]uint32]{rev: 5, unknown: true}
	var c chain[[]uint32]
	pushed, _ := c.push(5, []uint32{1, 2}, false, ids32Bytes)
	if delta := c.drop(tomb, ids32Bytes); delta != -pushed || c.head.Load() != tomb {
		t.Fatalf("drop at the first revision: delta %d (pushed %d), shared %v", delta, pushed, c.head.Load() == tomb)
	}
	if _, known := c.at(5); known {
		t.Fatal("a dropped slot is known at its revision")
	}

	var d chain[[]uint32]
	first, _ := d.push(5, []uint32{4}, false, ids32Bytes)
	second, _ := d.push(7, []uint32{4, 6}, false, ids32Bytes)
	if delta := d.drop(tomb, ids32Bytes); delta != -(first+second) || d.head.Load() != tomb {
		t.Fatalf("drop after a second version: delta %d (pushed %d and %d), shared %v", delta, first, second, d.head.Load() == tomb)
	}
	for _, rev := range []store.Revision{5, 6, 7, 9} {
		if v, known := d.at(rev); known {
			t.Fatalf("at %d the dropped slot reads %v", rev, v)
		}
	}
	if freed := d.prune(9, ids32Bytes); freed != 0 || tomb.older.Load() != nil || tomb.cut.Load() {
		t.Fatalf("pruning the dropped slot freed %d bytes; the tombstone changed: %v", freed, tomb.older.Load() != nil || tomb.cut.Load())
	}
}
