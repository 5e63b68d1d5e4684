package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// TestWithUpdates: an overlay answers as the store would after the updates, in key
// order, without writing them, and pages them with the store's cursors.
func TestWithUpdates(t *testing.T) {
	ctx := context.Background()
	st := memory.New(memory.Options{})
	defer st.Close()
	parse := func(s string) rel.Relationship {
		r, err := rel.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var stored []store.Update
	for _, s := range []string{"doc:a#viewer@user:x", "doc:c#viewer@user:x", "doc:e#viewer@user:x", "doc:c#owner@user:y"} {
		stored = append(stored, store.Update{Op: store.Create, Relationship: parse(s)})
	}
	rev, err := st.Write(ctx, nil, stored, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Reader(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	o := store.WithUpdates(r, []store.Update{
		{Op: store.Touch, Relationship: parse("doc:b#viewer@user:x")},
		{Op: store.Delete, Relationship: parse("doc:c#viewer@user:x")},
		{Op: store.Touch, Relationship: parse(`doc:e#viewer@user:x[flag]`)},
		{Op: store.Touch, Relationship: parse("doc:f#viewer@user:x")},
		{Op: store.Touch, Relationship: parse("doc:z#owner@user:x")},
	}, time.Now())
	var got []string
	for item, err := range o.Query(ctx, store.Filter{ResourceType: "doc", Relation: "viewer"}, store.QueryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rel.String(item.Relationship))
	}
	want := []string{"doc:a#viewer@user:x", "doc:b#viewer@user:x", "doc:e#viewer@user:x[flag]", "doc:f#viewer@user:x"}
	if len(got) != len(want) {
		t.Fatalf("overlay query = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("overlay query = %v, want %v", got, want)
		}
	}
	for item, err := range r.Query(ctx, store.Filter{ResourceType: "doc", ResourceIDs: []string{"b"}}, store.QueryOptions{}) {
		t.Fatalf("the store itself changed: %v %v", item, err)
	}
	// Pages of one, each resumed from the last one's cursor, whether the store or the
	// updates hold its relationship, add up to the whole query.
	all := store.Filter{ResourceType: "doc"}
	var whole, paged []string
	for item, err := range o.Query(ctx, all, store.QueryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		whole = append(whole, rel.String(item.Relationship))
	}
	var after store.Cursor
	for range 20 {
		var page []store.Item
		for item, err := range o.Query(ctx, all, store.QueryOptions{Limit: 1, After: after}) {
			if err != nil {
				t.Fatal(err)
			}
			page = append(page, item)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 1 {
			t.Fatalf("a page of one holds %d relationships", len(page))
		}
		paged, after = append(paged, rel.String(page[0].Relationship)), page[0].Cursor()
	}
	if !slices.Equal(paged, whole) || len(whole) != 6 {
		t.Errorf("pages of one = %v, the whole query %v (want 6 relationships)", paged, whole)
	}
}
