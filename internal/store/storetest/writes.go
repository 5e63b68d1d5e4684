package storetest

import (
	"context"
	"errors"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

func testEmpty(h *harness) {
	rev := h.head()
	h.expect(rev, all)
	text, err := h.reader(rev).Schema(h.ctx)
	if err != nil || text != "" {
		h.t.Fatalf("schema of an empty store: %q, %v; want \"\", nil", text, err)
	}
	if got := h.reader(rev).Revision(); got != rev {
		h.t.Fatalf("reader at %d reports revision %d", rev, got)
	}
}

func testCreateTouchDelete(h *harness) {
	r1 := h.create("document:readme#viewer@user:alice", "document:readme#viewer@user:bob")
	if r1 <= 0 || h.head() != r1 {
		h.t.Fatalf("write returned revision %d, head is %d", r1, h.head())
	}
	h.expect(r1, all, "document:readme#viewer@user:alice", "document:readme#viewer@user:bob")

	touched := h.rel("document:readme#viewer@user:alice")
	touched.Caveat = &rel.Caveat{Name: "on_weekdays", Context: map[string]any{"tz": "UTC"}}
	r2 := h.write(updates(store.Touch, touched, h.rel("document:readme#editor@user:carol"))...)
	if r2 <= r1 {
		h.t.Fatalf("second write got revision %d, not after %d", r2, r1)
	}
	h.expect(r2, all, "document:readme#editor@user:carol", "document:readme#viewer@user:alice", "document:readme#viewer@user:bob")
	got := h.query(r2, store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice"}}}, store.QueryOptions{})
	if len(got) != 1 || !sameRelationship(got[0].Relationship, touched) {
		h.t.Fatalf("after touch read %+v, want %+v", got, touched)
	}

	r3 := h.write(updates(store.Delete, h.rel("document:readme#viewer@user:bob"), h.rel("document:readme#viewer@user:nobody"))...)
	h.expect(r3, all, "document:readme#editor@user:carol", "document:readme#viewer@user:alice")
	// Deleted relationships can be created again.
	r4 := h.create("document:readme#viewer@user:bob")
	h.expect(r4, all, "document:readme#editor@user:carol", "document:readme#viewer@user:alice", "document:readme#viewer@user:bob")
}

func testCreateExisting(h *harness) {
	r1 := h.create("document:a#viewer@user:alice")
	us := updates(store.Create, h.rels("document:a#viewer@user:zed", "document:a#viewer@user:alice")...)
	_, err := h.s.Write(h.ctx, nil, us, nil)
	var exists *store.AlreadyExistsError
	h.expectErr(err, &exists)
	if exists.Relationship.Key() != h.rel("document:a#viewer@user:alice").Key() {
		h.t.Fatalf("AlreadyExistsError names %v", exists.Relationship.Key())
	}
	if h.head() != r1 {
		h.t.Fatalf("failed write moved the head from %d to %d", r1, h.head())
	}
	h.expect(h.head(), all, "document:a#viewer@user:alice")
	// A different subject relation or caveat-free touch is not a conflict.
	h.create("document:a#viewer@user:alice#friend")
	h.write(updates(store.Touch, h.rel("document:a#viewer@user:alice"))...)
	h.expect(h.head(), all, "document:a#viewer@user:alice", "document:a#viewer@user:alice#friend")
}

func testCreateOverExpired(h *harness) {
	old := h.rel("document:a#viewer@user:alice")
	old.Expiration = &past
	h.write(updates(store.Touch, old)...)
	rev := h.create("document:a#viewer@user:alice")
	got := h.query(rev, store.Filter{IncludeExpired: true}, store.QueryOptions{})
	if len(got) != 1 || got[0].Relationship.Expiration != nil {
		h.t.Fatalf("create over an expired relationship left %+v, want one unexpiring relationship", got)
	}
}

func testDuplicateUpdates(h *harness) {
	base := h.create("document:a#viewer@user:alice")
	caveated := h.rel("document:b#viewer@user:bob")
	caveated.Caveat = &rel.Caveat{Name: "c"}
	batches := [][]store.Update{
		{{Op: store.Create, Relationship: h.rel("document:b#viewer@user:bob")}, {Op: store.Touch, Relationship: caveated}},
		{{Op: store.Touch, Relationship: h.rel("document:a#viewer@user:alice")}, {Op: store.Delete, Relationship: h.rel("document:a#viewer@user:alice")}},
		{{Op: store.Touch, Relationship: h.rel("document:c#viewer@user:carol")}, {Op: store.Touch, Relationship: h.rel("document:c#viewer@user:carol")}},
	}
	for _, batch := range batches {
		_, err := h.s.Write(h.ctx, nil, batch, nil)
		var dup *store.DuplicateUpdateError
		h.expectErr(err, &dup)
	}
	if h.head() != base {
		h.t.Fatalf("refused writes moved the head from %d to %d", base, h.head())
	}
	h.expect(base, all, "document:a#viewer@user:alice")
}

func testInvalidUpdates(h *harness) {
	base := h.create("document:a#viewer@user:alice")
	nameless := h.rel("document:b#viewer@user:bob")
	nameless.Caveat = &rel.Caveat{Context: map[string]any{"x": 1.0}}
	batches := [][]store.Update{
		{{Op: store.Create, Relationship: h.rel("document:c#viewer@user:carol")}, {Op: 0, Relationship: h.rel("document:b#viewer@user:bob")}},
		{{Op: store.Create, Relationship: h.rel("document:c#viewer@user:carol")}, {Op: store.Touch, Relationship: nameless}},
	}
	for _, batch := range batches {
		_, err := h.s.Write(h.ctx, nil, batch, nil)
		var invalid *store.InvalidUpdateError
		h.expectErr(err, &invalid)
	}
	if h.head() != base {
		h.t.Fatalf("refused writes moved the head from %d to %d", base, h.head())
	}
	h.expect(base, all, "document:a#viewer@user:alice")
}

func testPreconditions(h *harness) {
	base := h.create("document:a#viewer@user:alice", "document:a#owner@user:bob")
	matchAlice := store.Filter{ResourceType: "document", Relation: "viewer", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice"}}}
	matchNobody := store.Filter{ResourceType: "document", Relation: "viewer", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"nobody"}}}
	us := updates(store.Touch, h.rels("document:a#viewer@user:carol", "folder:f#viewer@user:carol")...)

	failing := [][]store.Precondition{
		{{Op: store.MustMatch, Filter: matchNobody}},
		{{Op: store.MustNotMatch, Filter: matchAlice}},
		{{Op: store.MustMatch, Filter: matchAlice}, {Op: store.MustNotMatch, Filter: store.Filter{ResourceType: "document"}}},
	}
	for _, pre := range failing {
		_, err := h.s.Write(h.ctx, pre, us, nil)
		var failed *store.PreconditionFailedError
		h.expectErr(err, &failed)
		if failed.Error() == "" {
			h.t.Fatal("precondition error has no message")
		}
	}
	if h.head() != base {
		h.t.Fatalf("failed preconditions moved the head from %d to %d", base, h.head())
	}
	h.expect(base, all, "document:a#owner@user:bob", "document:a#viewer@user:alice")

	ok := []store.Precondition{{Op: store.MustMatch, Filter: matchAlice}, {Op: store.MustNotMatch, Filter: matchNobody}}
	rev, err := h.s.Write(h.ctx, ok, us, nil)
	if err != nil {
		h.t.Fatalf("write with holding preconditions: %v", err)
	}
	h.expect(rev, all, "document:a#owner@user:bob", "document:a#viewer@user:alice", "document:a#viewer@user:carol", "folder:f#viewer@user:carol")

	// Preconditions see the state before the batch, not the batch itself.
	pre := []store.Precondition{{Op: store.MustMatch, Filter: store.Filter{ResourceType: "folder", ResourceIDs: []string{"new"}}}}
	_, err = h.s.Write(h.ctx, pre, updates(store.Create, h.rel("folder:new#viewer@user:x")), nil)
	var failed *store.PreconditionFailedError
	h.expectErr(err, &failed)

	// An expired relationship does not satisfy MustMatch.
	exp := h.rel("folder:old#viewer@user:x")
	exp.Expiration = &past
	h.write(updates(store.Touch, exp)...)
	pre = []store.Precondition{{Op: store.MustMatch, Filter: store.Filter{ResourceType: "folder", ResourceIDs: []string{"old"}}}}
	_, err = h.s.Write(h.ctx, pre, nil, nil)
	h.expectErr(err, &failed)
}

func testValidator(h *harness) {
	base := h.create("document:a#viewer@user:alice")
	errNo := errors.New("validator says no")
	var sawRev store.Revision
	var saw []string
	validate := func(ctx context.Context, r store.Reader) error {
		sawRev = r.Revision()
		saw = nil
		for item, err := range r.Query(ctx, all, store.QueryOptions{}) {
			if err != nil {
				return err
			}
			saw = append(saw, keyString(item.Relationship.Key()))
		}
		return errNo
	}
	_, err := h.s.Write(h.ctx, nil, updates(store.Create, h.rel("document:a#viewer@user:bob")), validate)
	if !errors.Is(err, errNo) {
		h.t.Fatalf("write with a refusing validator returned %v, want %v", err, errNo)
	}
	if sawRev != base || len(saw) != 1 || saw[0] != "document:a#viewer@user:alice" {
		h.t.Fatalf("validator read %q at revision %d, want the state at %d", saw, sawRev, base)
	}
	if h.head() != base {
		h.t.Fatalf("refused write moved the head from %d to %d", base, h.head())
	}
	h.expect(base, all, "document:a#viewer@user:alice")

	accept := func(context.Context, store.Reader) error { return nil }
	rev, err := h.s.Write(h.ctx, nil, updates(store.Create, h.rel("document:a#viewer@user:bob")), accept)
	if err != nil {
		h.t.Fatal(err)
	}
	h.expect(rev, all, "document:a#viewer@user:alice", "document:a#viewer@user:bob")
}

func testEmptyAndNoopWrites(h *harness) {
	r1 := h.write()
	r2 := h.write()
	if r2 <= r1 {
		h.t.Fatalf("empty writes returned revisions %d then %d; each write must get a new revision", r1, r2)
	}
	r3 := h.create("document:a#viewer@user:alice")
	r4 := h.write(updates(store.Touch, h.rel("document:a#viewer@user:alice"))...)
	r5 := h.write(updates(store.Delete, h.rel("document:zzz#viewer@user:nobody"))...)
	if !(r3 < r4 && r4 < r5) {
		h.t.Fatalf("revisions %d, %d, %d do not increase", r3, r4, r5)
	}
	h.expect(r5, all, "document:a#viewer@user:alice")
}

func testOldRevisions(h *harness) {
	r0 := h.head()
	r1 := h.create("document:a#viewer@user:alice", "document:b#viewer@user:bob")
	caveated := h.rel("document:a#viewer@user:alice")
	caveated.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"n": 1.0}}
	r2 := h.write(append(updates(store.Touch, caveated), updates(store.Delete, h.rel("document:b#viewer@user:bob"))...)...)
	r3 := h.write(updates(store.Delete, h.rel("document:a#viewer@user:alice"))...)
	r4 := h.create("document:a#viewer@user:alice")

	h.expect(r0, all)
	h.expect(r1, all, "document:a#viewer@user:alice", "document:b#viewer@user:bob")
	h.expect(r2, all, "document:a#viewer@user:alice")
	h.expect(r3, all)
	h.expect(r4, all, "document:a#viewer@user:alice")
	caveatAt := func(rev store.Revision) *rel.Caveat {
		items := h.query(rev, store.Filter{ResourceType: "document", ResourceIDs: []string{"a"}}, store.QueryOptions{})
		if len(items) != 1 {
			h.t.Fatalf("at %d read %d relationships, want 1", rev, len(items))
		}
		return items[0].Relationship.Caveat
	}
	if c := caveatAt(r1); c != nil {
		h.t.Fatalf("at %d the relationship has caveat %+v, want none", r1, c)
	}
	if c := caveatAt(r2); c == nil || c.Name != "c" {
		h.t.Fatalf("at %d the relationship has caveat %+v, want c", r2, c)
	}
	if c := caveatAt(r4); c != nil {
		h.t.Fatalf("at %d the relationship has caveat %+v, want none", r4, c)
	}
}

func testRevisionBounds(h *harness) {
	head := h.create("document:a#viewer@user:alice")
	if _, err := h.s.Reader(h.ctx, head+1); !errors.Is(err, store.ErrRevisionInFuture) {
		h.t.Fatalf("reader past the head: %v, want ErrRevisionInFuture", err)
	}
	if _, err := h.s.Reader(h.ctx, 0); !errors.Is(err, store.ErrRevisionGone) {
		h.t.Fatalf("reader at revision 0: %v, want ErrRevisionGone", err)
	}
}
