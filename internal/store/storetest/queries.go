package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// filterFixture is a small graph with every kind of subject.
var filterFixture = []string{
	"document:a#viewer@user:alice",
	"document:a#viewer@user:*",
	"document:a#viewer@group:eng#member",
	"document:a#viewer@group:eng",
	"document:a#owner@user:bob",
	"document:ab#viewer@user:alice",
	"document:b#viewer@user:carol",
	"document:b#parent@folder:f",
	"folder:f#viewer@group:eng#member",
	"folder:f#viewer@user:alice",
	"group:eng#member@user:alice",
	"group:eng#member@group:ops#member",
}

func testResourceFilters(h *harness) {
	rev := h.create(filterFixture...)
	h.expect(rev, store.Filter{ResourceType: "folder"}, "folder:f#viewer@group:eng#member", "folder:f#viewer@user:alice")
	h.expect(rev, store.Filter{ResourceType: "document", ResourceIDs: []string{"b", "ab", "missing"}},
		"document:ab#viewer@user:alice", "document:b#parent@folder:f", "document:b#viewer@user:carol")
	h.expect(rev, store.Filter{ResourceType: "document", ResourceIDPrefix: "a"},
		"document:a#owner@user:bob", "document:a#viewer@group:eng", "document:a#viewer@group:eng#member",
		"document:a#viewer@user:*", "document:a#viewer@user:alice", "document:ab#viewer@user:alice")
	h.expect(rev, store.Filter{ResourceType: "document", ResourceIDPrefix: "ab", ResourceIDs: []string{"a", "ab"}},
		"document:ab#viewer@user:alice")
	h.expect(rev, store.Filter{ResourceType: "document", ResourceIDs: []string{"a"}, Relation: "owner"}, "document:a#owner@user:bob")
	h.expect(rev, store.Filter{Relation: "member"}, "group:eng#member@group:ops#member", "group:eng#member@user:alice")
	h.expect(rev, store.Filter{ResourceIDs: []string{"f", "eng"}},
		"folder:f#viewer@group:eng#member", "folder:f#viewer@user:alice", "group:eng#member@group:ops#member", "group:eng#member@user:alice")
	h.expect(rev, store.Filter{ResourceType: "nosuchtype"})
	h.expect(rev, store.Filter{ResourceType: "document", Relation: "nosuchrelation"})
	h.expect(rev, store.Filter{ResourceType: "document", ResourceIDs: []string{"nosuchid"}})
	h.expect(rev, store.Filter{ResourceType: "document", ResourceIDPrefix: "zz"})
}

func testSubjectFilters(h *harness) {
	rev := h.create(filterFixture...)
	subject := func(sf store.SubjectFilter) store.Filter { return store.Filter{Subject: &sf} }
	h.expect(rev, subject(store.SubjectFilter{Type: "group"}),
		"document:a#viewer@group:eng", "document:a#viewer@group:eng#member", "folder:f#viewer@group:eng#member", "group:eng#member@group:ops#member")
	// A set subject and its ellipsis form are told apart only when the relation is set.
	h.expect(rev, subject(store.SubjectFilter{Type: "group", IDs: []string{"eng"}, RelationSet: true}), "document:a#viewer@group:eng")
	h.expect(rev, subject(store.SubjectFilter{Type: "group", IDs: []string{"eng"}, Relation: "member", RelationSet: true}),
		"document:a#viewer@group:eng#member", "folder:f#viewer@group:eng#member")
	h.expect(rev, subject(store.SubjectFilter{Relation: "member", RelationSet: true}),
		"document:a#viewer@group:eng#member", "folder:f#viewer@group:eng#member", "group:eng#member@group:ops#member")
	// The wildcard is stored as the id "*" and matches only when asked for.
	h.expect(rev, subject(store.SubjectFilter{Type: "user", IDs: []string{rel.Wildcard}}), "document:a#viewer@user:*")
	h.expect(rev, store.Filter{
		ResourceType: "document", ResourceIDs: []string{"a", "b"}, Relation: "viewer",
		Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice", rel.Wildcard, "carol"}},
	},
		"document:a#viewer@user:*", "document:a#viewer@user:alice", "document:b#viewer@user:carol")
	h.expect(rev, store.Filter{ResourceType: "document", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice"}}},
		"document:a#viewer@user:alice", "document:ab#viewer@user:alice")
	h.expect(rev, subject(store.SubjectFilter{IDs: []string{"f", "ops"}}), "document:b#parent@folder:f", "group:eng#member@group:ops#member")
	h.expect(rev, subject(store.SubjectFilter{Type: "user", IDs: []string{"nobody"}}))
	h.expect(rev, subject(store.SubjectFilter{Type: "user", Relation: "nosuch", RelationSet: true}))
}

// testFiltersAgainstBruteForce compares random filters with store.Filter.Matches over
// a data set with both wide resources and wide subjects, so that whatever index a
// backend picks is exercised.
func testFiltersAgainstBruteForce(h *harness) {
	rnd := rand.New(rand.NewPCG(7, 11))
	u := universe{
		types: []string{"doc", "folder"}, ids: []string{"a", "b", "c", "ab", "big"},
		relations: []string{"viewer", "owner"}, subjectTypes: []string{"user", "group"},
		subjectIDs: []string{"x", "y", "*", "big"}, subjectRels: []string{"", "member"},
	}
	var us []store.Update
	seen := map[rel.Key]bool{}
	add := func(r rel.Relationship) {
		if !seen[r.Key()] {
			seen[r.Key()] = true
			us = append(us, store.Update{Op: store.Create, Relationship: r})
		}
	}
	for i := range 300 { // one resource with many subjects, one subject on many resources
		add(rel.Relationship{
			Resource: rel.ObjectRef{Type: "doc", ID: "big"}, Relation: "viewer",
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("u", i)}},
		})
		add(rel.Relationship{
			Resource: rel.ObjectRef{Type: "doc", ID: fmt.Sprint("d", i)}, Relation: "viewer",
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "big"}},
		})
	}
	for range 200 {
		add(u.relationship(rnd))
	}
	rev := h.write(us...)
	everything := h.query(rev, store.Filter{IncludeExpired: true}, store.QueryOptions{})
	now := time.Now()
	for i := range 300 {
		f := u.filter(rnd)
		if i%5 == 0 { // long id lists, as the engine sends
			f.ResourceIDs = manyIDs(rnd, "d", f.ResourceIDs)
		}
		if i%7 == 0 && f.Subject != nil {
			f.Subject.IDs = manyIDs(rnd, "u", f.Subject.IDs)
		}
		var want []string
		for _, it := range everything {
			if f.Matches(it.Relationship, now) {
				want = append(want, keyString(it.Relationship.Key()))
			}
		}
		h.expect(rev, f, want...)
	}
}

// manyIDs adds 10 to 40 ids of the form prefix+number to ids.
func manyIDs(rnd *rand.Rand, prefix string, ids []string) []string {
	for range 10 + rnd.IntN(30) {
		ids = append(ids, fmt.Sprint(prefix, rnd.IntN(320)))
	}
	return ids
}

func testOrderAndPaging(h *harness) {
	var us []store.Update
	for _, doc := range []string{"b", "a", "c", "aa", "B"} {
		for _, s := range []string{"user:z", "user:a", "group:g#member", "group:g", "user:m"} {
			for _, r := range []string{"viewer", "editor"} {
				us = append(us, store.Update{Op: store.Touch, Relationship: h.rel("document:" + doc + "#" + r + "@" + s)})
			}
		}
	}
	us = append(us, store.Update{Op: store.Touch, Relationship: h.rel("a:x#r@user:a")})
	rev := h.write(us...)
	filters := []store.Filter{
		all,
		{ResourceType: "document"},
		{ResourceType: "document", ResourceIDs: []string{"c", "a", "B"}},
		{ResourceType: "document", ResourceIDs: []string{"B", "a", "c"}},       // sorted, as a lookup's sets come
		{ResourceType: "document", ResourceIDs: []string{"B", "a", "a", "zz"}}, // sorted, one twice, one never stored
		{ResourceType: "document", Relation: "viewer", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"z", "a"}}},
		{Subject: &store.SubjectFilter{Type: "group", IDs: []string{"g"}}},
	}
	for _, f := range filters {
		full := h.query(rev, f, store.QueryOptions{})
		keys := make([]rel.Key, len(full))
		for i, it := range full {
			keys[i] = it.Relationship.Key()
		}
		if !slices.IsSortedFunc(keys, store.CompareKeys) {
			h.t.Fatalf("query %s returned keys out of order: %q", f, relStrings(full))
		}
		if len(slices.CompactFunc(slices.Clone(keys), func(a, b rel.Key) bool { return a == b })) != len(keys) {
			h.t.Fatalf("query %s returned a key twice", f)
		}
		for _, limit := range []int{1, 2, 7} {
			if got := h.pages(rev, f, limit); !slices.Equal(got, relStrings(full)) {
				h.t.Fatalf("query %s in pages of %d:\n got  %q\n want %q", f, limit, got, relStrings(full))
			}
		}
		// Unordered, the same relationships, in whatever order.
		unordered := relStrings(h.query(rev, f, store.QueryOptions{Unordered: true}))
		slices.Sort(unordered)
		if want := slices.Sorted(slices.Values(relStrings(full))); !slices.Equal(unordered, want) {
			h.t.Fatalf("query %s unordered:\n got  %q\n want %q", f, unordered, want)
		}
		// Each item's cursor resumes right after it.
		if len(full) > 3 {
			rest := h.query(rev, f, store.QueryOptions{After: full[2].Cursor()})
			if !slices.Equal(relStrings(rest), relStrings(full[3:])) {
				h.t.Fatalf("resuming %s after item 2: got %q, want %q", f, relStrings(rest), relStrings(full[3:]))
			}
		}
	}
}

// testLargeLimits uses limits larger than any batch a backend might read at once.
func testLargeLimits(h *harness) {
	var many []store.Update
	for i := range 1500 {
		many = append(many,
			store.Update{Op: store.Create, Relationship: h.rel(fmt.Sprintf("file:f%04d#viewer@user:many", i))},
			store.Update{Op: store.Create, Relationship: h.rel(fmt.Sprintf("file:f%04d#viewer@user:other", i))})
	}
	rev := h.write(many...)
	for _, f := range []store.Filter{
		{ResourceType: "file"},
		{ResourceType: "file", Relation: "viewer", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"many"}}},
	} {
		full := relStrings(h.query(rev, f, store.QueryOptions{}))
		for _, limit := range []int{700, 1300} {
			if got := relStrings(h.query(rev, f, store.QueryOptions{Limit: limit})); !slices.Equal(got, full[:limit]) {
				h.t.Fatalf("query %s with limit %d returned %d items, not the first %d of %d", f, limit, len(got), limit, len(full))
			}
		}
	}
}

// testCursorAcrossWrites resumes a query after its last relationship was deleted.
func testCursorAcrossWrites(h *harness) {
	rev := h.create("document:a#viewer@user:a", "document:b#viewer@user:b", "document:c#viewer@user:c", "document:d#viewer@user:d")
	first := h.query(rev, all, store.QueryOptions{Limit: 3})
	h.write(updates(store.Delete, first[2].Relationship)...)
	rest := h.query(h.head(), all, store.QueryOptions{After: first[2].Cursor()})
	full := h.query(h.head(), all, store.QueryOptions{})
	if !slices.Equal(relStrings(rest), relStrings(full[2:])) {
		h.t.Fatalf("resuming after a deleted relationship: got %q, want %q", relStrings(rest), relStrings(full[2:]))
	}
}

// pages reads f in pages of limit, resuming each from the previous page's last cursor.
func (h *harness) pages(rev store.Revision, f store.Filter, limit int) []string {
	h.t.Helper()
	var out []string
	var after store.Cursor
	for range 1000 {
		page := h.query(rev, f, store.QueryOptions{Limit: limit, After: after})
		if len(page) > limit {
			h.t.Fatalf("query %s with limit %d returned %d items", f, limit, len(page))
		}
		out = append(out, relStrings(page)...)
		if len(page) < limit {
			return out
		}
		after = page[len(page)-1].Cursor()
	}
	h.t.Fatalf("paging %s never ended", f)
	return nil
}

func testInvalidCursor(h *harness) {
	rev := h.create("document:a#viewer@user:alice", "document:b#viewer@user:alice")
	r := h.reader(rev)
	queryErr := func(f store.Filter, c store.Cursor) error {
		for _, err := range r.Query(h.ctx, f, store.QueryOptions{After: c}) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range []store.Cursor{"garbage!", "AAAA", "%%%"} {
		if err := queryErr(all, c); !errors.Is(err, store.ErrInvalidCursor) {
			h.t.Fatalf("cursor %q: %v, want ErrInvalidCursor", c, err)
		}
	}
	items := h.query(rev, store.Filter{ResourceType: "document"}, store.QueryOptions{Limit: 1})
	if err := queryErr(store.Filter{ResourceType: "folder"}, items[0].Cursor()); !errors.Is(err, store.ErrInvalidCursor) {
		h.t.Fatalf("cursor of another filter: %v, want ErrInvalidCursor", err)
	}
}

func testExpiration(h *harness) {
	expired := h.rel("document:a#viewer@user:alice")
	expired.Expiration = &past
	later := h.rel("document:a#viewer@user:bob")
	later.Expiration = &future
	rev := h.write(updates(store.Touch, expired, later, h.rel("document:a#viewer@user:carol"))...)
	h.expect(rev, all, "document:a#viewer@user:bob", "document:a#viewer@user:carol")
	h.expect(rev, store.Filter{IncludeExpired: true}, "document:a#viewer@user:alice", "document:a#viewer@user:bob", "document:a#viewer@user:carol")
	h.expect(rev, store.Filter{
		ResourceType: "document", ResourceIDs: []string{"a"}, Relation: "viewer",
		Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice"}},
	})
	items := h.query(rev, store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: []string{"bob"}}}, store.QueryOptions{})
	if len(items) != 1 || items[0].Relationship.Expiration == nil || !items[0].Relationship.Expiration.Equal(future) {
		h.t.Fatalf("expiration did not round-trip: %+v", items)
	}
	// Touch can move an expiration into the future or remove it.
	expired.Expiration = nil
	rev = h.write(updates(store.Touch, expired)...)
	h.expect(rev, all, "document:a#viewer@user:alice", "document:a#viewer@user:bob", "document:a#viewer@user:carol")
}

func testCaveats(h *harness) {
	ctx := map[string]any{
		"ip":     "10.0.0.1",
		"n":      3.5,
		"ok":     true,
		"nested": map[string]any{"list": []any{"a", 2.0, false}},
	}
	x := h.rel("document:a#viewer@user:alice")
	x.Caveat = &rel.Caveat{Name: "ip_allowed", Context: ctx}
	y := h.rel("document:a#viewer@user:bob")
	y.Caveat = &rel.Caveat{Name: "always"}
	rev := h.write(updates(store.Create, x, y)...)
	// Changing the caller's map after the write must not reach the store.
	ctx["ip"] = "changed"
	ctx["nested"].(map[string]any)["list"].([]any)[0] = "changed"

	read := func() []store.Item {
		return h.query(rev, store.Filter{ResourceType: "document"}, store.QueryOptions{})
	}
	items := read()
	want := map[string]any{"ip": "10.0.0.1", "n": 3.5, "ok": true, "nested": map[string]any{"list": []any{"a", 2.0, false}}}
	if len(items) != 2 || items[0].Relationship.Caveat == nil || items[0].Relationship.Caveat.Name != "ip_allowed" ||
		!sameContext(items[0].Relationship.Caveat.Context, want) {
		h.t.Fatalf("caveat did not round-trip: got %+v", items[0].Relationship.Caveat)
	}
	if c := items[1].Relationship.Caveat; c == nil || c.Name != "always" || len(c.Context) != 0 {
		h.t.Fatalf("caveat without context did not round-trip: got %+v", c)
	}
	// Changing a returned map must not reach the store either.
	items[0].Relationship.Caveat.Context["ip"] = "changed again"
	items[0].Relationship.Caveat.Context["nested"].(map[string]any)["list"].([]any)[1] = "x"
	if c := read()[0].Relationship.Caveat; !sameContext(c.Context, want) {
		h.t.Fatalf("a caller's change to a returned context reached the store: %+v", c.Context)
	}
	// Touch replaces a caveat's context and can remove the caveat.
	x.Caveat = &rel.Caveat{Name: "ip_allowed", Context: map[string]any{"ip": "10.0.0.2"}}
	y.Caveat = nil
	rev = h.write(updates(store.Touch, x, y)...)
	items = read()
	if c := items[0].Relationship.Caveat; c == nil || !sameContext(c.Context, map[string]any{"ip": "10.0.0.2"}) {
		h.t.Fatalf("touch did not replace the caveat context: %+v", c)
	}
	if c := items[1].Relationship.Caveat; c != nil {
		h.t.Fatalf("touch did not remove the caveat: %+v", c)
	}
}
