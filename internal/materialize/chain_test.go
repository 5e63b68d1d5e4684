package materialize

import (
	"slices"
	"testing"
)

// TestDropSharesTombstone: a slot written first at a build's revision and dropped
// there takes the shared tombstone, freeing all it held; a version pushed over it
// later reads past it, and pruning that version neither counts the tombstone's bytes
// nor changes it. A slot with an older version gets a tombstone of its own, and reads
// below the drop still find the older value.
func TestDropSharesTombstone(t *testing.T) {
	tomb := &version[[]uint32]{rev: 5, unknown: true, shared: true}
	var c chain[[]uint32]
	pushed, _ := c.push(5, []uint32{1, 2}, false, ids32Bytes)
	if delta, superseded := c.drop(5, tomb, ids32Bytes); delta != -pushed || superseded || c.head.Load() != tomb {
		t.Fatalf("drop at the build's revision: delta %d (pushed %d), superseded %v, shared %v", delta, pushed, superseded, c.head.Load() == tomb)
	}
	if _, known := c.at(5); known {
		t.Fatal("a dropped slot is known at its revision")
	}
	pushed, superseded := c.push(7, []uint32{3}, false, ids32Bytes)
	if pushed != versionBytes(c.head.Load(), ids32Bytes) || !superseded {
		t.Fatalf("push over the tombstone: %d bytes, superseded %v", pushed, superseded)
	}
	if v, known := c.at(7); !known || !slices.Equal(v, []uint32{3}) {
		t.Fatalf("at 7: %v %v", v, known)
	}
	if _, known := c.at(6); known {
		t.Fatal("below the new version, the dropped slot is known")
	}
	if freed := c.prune(7, ids32Bytes); freed != 0 || tomb.older.Load() != nil || tomb.cut.Load() {
		t.Fatalf("pruning below the new version freed %d bytes; the tombstone changed: %v", freed, tomb.older.Load() != nil || tomb.cut.Load())
	}

	var d chain[[]uint32]
	d.push(3, []uint32{4}, false, ids32Bytes)
	if _, superseded := d.drop(5, tomb, ids32Bytes); !superseded || d.head.Load() == tomb {
		t.Fatal("a slot with an older version took the shared tombstone")
	}
	if v, known := d.at(4); !known || !slices.Equal(v, []uint32{4}) {
		t.Fatalf("below the drop: %v %v", v, known)
	}
}
