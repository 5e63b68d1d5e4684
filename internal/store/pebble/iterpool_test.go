package pebble

import (
	"context"
	"testing"

	"github.com/latch-authz/latch/internal/store"
)

// TestReusedIteratorsSeeNewRevisions: queries reuse iterators, yet a query at a
// revision newer than every idle iterator sees that revision's writes, and a reader at
// an old revision still reads exactly its state.
func TestReusedIteratorsSeeNewRevisions(t *testing.T) {
	s := openTest(t, Options{})
	all := store.Filter{ResourceType: "doc"}
	first := mustWrite(t, s, store.Create, relationship("doc", "a", "viewer", "user", "x", ""))
	expectKeys(t, s, first, all, "doc:a#viewer@user:x")
	if idle := len(s.iters.idle); idle == 0 {
		t.Fatal("the query's iterator was not kept for reuse")
	}
	second := mustWrite(t, s, store.Create, relationship("doc", "b", "viewer", "user", "y", ""))
	expectKeys(t, s, second, all, "doc:a#viewer@user:x", "doc:b#viewer@user:y")
	third := mustWrite(t, s, store.Delete, relationship("doc", "a", "viewer", "user", "x", ""))
	for range 3 { // whichever idle iterator each query takes
		expectKeys(t, s, third, all, "doc:b#viewer@user:y")
		expectKeys(t, s, first, all, "doc:a#viewer@user:x")
		expectKeys(t, s, second, all, "doc:a#viewer@user:x", "doc:b#viewer@user:y")
	}
	for _, pi := range s.iters.idle {
		if pi.head < uint64(first) {
			t.Errorf("an idle iterator claims head %d, before the first write (%d)", pi.head, first)
		}
	}
	// Close closes the idle iterators (Pebble reports leaked ones as an error).
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reader(context.Background(), third); err == nil {
		t.Error("reader of a closed store")
	}
}
