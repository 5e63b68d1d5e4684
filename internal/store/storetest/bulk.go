package storetest

import (
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// testBulkLoad checks BulkLoad: what it is given is read at one new revision, caveats
// and expirations kept, and at the revision before it none of it is; a relationship
// that exists (expired or not) or is given twice (both AlreadyExistsError, as a
// unique index reports them), an invalid one or an error from the source fails the
// load whole, leaving the head and the data as they were.
func testBulkLoad(h *harness) {
	base := h.create("folder:f#viewer@user:alice")
	var many []rel.Relationship
	for i := range 2500 {
		many = append(many, h.rel(fmt.Sprintf("document:d%04d#viewer@user:u%d", i, i%7)))
	}
	special := h.rel("document:zz#viewer@user:carol")
	special.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"x": "y"}}
	special.Expiration = &future
	rev, err := h.s.BulkLoad(h.ctx, RelSeq(append(slices.Clone(many), special), nil))
	if err != nil {
		h.t.Fatal(err)
	}
	if rev <= base || h.head() != rev {
		h.t.Fatalf("bulk load committed revision %d after %d; the head is %d", rev, base, h.head())
	}
	docs := store.Filter{ResourceType: "document"}
	if got := h.read(rev, docs); len(got) != len(many)+1 {
		h.t.Fatalf("read %d documents after the load, want %d", len(got), len(many)+1)
	}
	h.expect(base, docs)
	got := h.query(rev, store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: []string{"carol"}}}, store.QueryOptions{})
	if len(got) != 1 || got[0].Relationship.Caveat == nil || got[0].Relationship.Caveat.Context["x"] != "y" || !got[0].Relationship.Expiration.Equal(future) {
		h.t.Fatalf("bulk-loaded caveat and expiration read back as %+v", got)
	}

	expired := h.rel("folder:g#viewer@user:bob")
	expired.Expiration = &past
	h.write(updates(store.Touch, expired)...)
	head, before := h.head(), h.read(h.head(), store.Filter{IncludeExpired: true})
	fresh := []rel.Relationship{h.rel("document:n1#viewer@user:dan"), h.rel("document:n2#viewer@user:dan")}
	nameless := h.rel("document:n3#viewer@user:dan")
	nameless.Caveat = &rel.Caveat{}
	errSource := errors.New("source failed")
	var exists *store.AlreadyExistsError
	var invalid *store.InvalidUpdateError
	for _, tc := range []struct {
		name   string
		rels   iter.Seq2[rel.Relationship, error]
		target any
	}{
		{"existing", RelSeq(append(slices.Clone(fresh), many[10]), nil), &exists},
		{"existing expired", RelSeq(append(slices.Clone(fresh), expired), nil), &exists},
		{"duplicate", RelSeq(append(slices.Clone(fresh), fresh[0]), nil), &exists},
		{"invalid", RelSeq(append(slices.Clone(fresh), nameless), nil), &invalid},
		{"source error", RelSeq(fresh, errSource), errSource},
	} {
		_, err := h.s.BulkLoad(h.ctx, tc.rels)
		if e, ok := tc.target.(error); ok && !errors.Is(err, e) || !ok && !errors.As(err, tc.target) {
			h.t.Fatalf("%s: bulk load returned %v, want %T", tc.name, err, tc.target)
		}
		if h.head() != head {
			h.t.Fatalf("%s: failed bulk load moved the head from %d to %d", tc.name, head, h.head())
		}
		if after := h.read(head, store.Filter{IncludeExpired: true}); !slices.Equal(after, before) {
			h.t.Fatalf("%s: failed bulk load changed the data: %d relationships, were %d", tc.name, len(after), len(before))
		}
	}
	if _, err := h.s.BulkLoad(h.ctx, RelSeq(fresh, nil)); err != nil {
		h.t.Fatalf("bulk load after failed ones: %v", err)
	}
}

// RelSeq yields rels, then err if it is not nil: a bulk load's source, for tests.
func RelSeq(rels []rel.Relationship, err error) iter.Seq2[rel.Relationship, error] {
	return func(yield func(rel.Relationship, error) bool) {
		for _, r := range rels {
			if !yield(r, nil) {
				return
			}
		}
		if err != nil {
			yield(rel.Relationship{}, err)
		}
	}
}
