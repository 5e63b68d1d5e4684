package memory

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/storetest"
)

// bulkRels returns n relationships over a few hundred documents and users, spanning
// several of a bulk load's batches when n is large.
func bulkRels(n int) []rel.Relationship {
	out := make([]rel.Relationship, n)
	for i := range out {
		out[i] = relationship("document", fmt.Sprint("d", i/7), []string{"viewer", "editor"}[i%2], "user", fmt.Sprint("u", i%7, "-", i/700), "")
	}
	return out
}

func TestBulkLoad(t *testing.T) {
	ctx := context.Background()
	s, c := newTestStore(t, time.Hour)
	base := mustWrite(t, s, store.Create, relationship("folder", "f", "viewer", "user", "u0-0", ""))
	w := s.Watch(ctx, base, store.WatchOptions{})
	exp := c.Now().Add(time.Hour)
	special := relationship("document", "zz", "viewer", "user", "carol", "")
	special.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"x": "y"}}
	special.Expiration = &exp
	rels := append(bulkRels(2*bulkBatch+100), special)

	// Readers at the head see nothing of a load before it commits.
	during := func(yield func(rel.Relationship, error) bool) {
		for i, r := range rels {
			if i == bulkBatch+1 {
				if got := readAll(t, s, base, store.Filter{ResourceType: "document"}); len(got) != 0 {
					t.Errorf("a reader at the head saw %d relationships of a load in progress", len(got))
				}
			}
			if !yield(r, nil) {
				return
			}
		}
	}
	rev, err := s.BulkLoad(ctx, during)
	if err != nil {
		t.Fatal(err)
	}
	if rev != base+1 {
		t.Fatalf("bulk load committed revision %d, want %d", rev, base+1)
	}
	checkInvariants(t, s)
	if got := readAll(t, s, rev, store.Filter{ResourceType: "document"}); len(got) != len(rels) {
		t.Fatalf("read %d documents after the load, want %d", len(got), len(rels))
	}
	if got := readAll(t, s, base, store.Filter{ResourceType: "document"}); len(got) != 0 {
		t.Fatalf("the revision before the load reads %d documents", len(got))
	}
	r, _ := s.Reader(ctx, rev)
	for item, err := range r.Query(ctx, store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: []string{"carol"}}}, store.QueryOptions{}) {
		if err != nil || item.Relationship.Caveat == nil || item.Relationship.Caveat.Context["x"] != "y" || !item.Relationship.Expiration.Equal(exp) {
			t.Fatalf("bulk-loaded caveat and expiration read back as %+v, %v", item.Relationship, err)
		}
	}
	// Watchers get the load as one revision of touches.
	for ch, err := range w {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Revision != rev || len(ch.Updates) != len(rels) {
			t.Fatalf("watch after the load: revision %d with %d updates, want %d with %d", ch.Revision, len(ch.Updates), rev, len(rels))
		}
		break
	}
	// Writes go on as usual, at the next revision.
	if next := mustWrite(t, s, store.Delete, rels[0]); next != rev+1 {
		t.Fatalf("write after the load at revision %d, want %d", next, rev+1)
	}
	checkInvariants(t, s)
}

func TestBulkLoadFailsWhole(t *testing.T) {
	ctx := context.Background()
	s, c := newTestStore(t, time.Hour)
	many := bulkRels(bulkBatch + 50)
	existing := relationship("document", "exists", "viewer", "user", "u", "")
	expired := relationship("document", "expired", "viewer", "user", "u", "")
	soon := c.Now().Add(time.Minute)
	expired.Expiration = &soon
	deleted := many[bulkBatch+10]
	mustWrite(t, s, store.Create, existing, expired, deleted)
	head := mustWrite(t, s, store.Delete, deleted) // an ended version does not block a load
	c.advance(time.Hour)
	before := s.Stats()
	nameless := relationship("document", "n", "viewer", "user", "u", "")
	nameless.Caveat = &rel.Caveat{}
	errSource := errors.New("source failed")
	// A load whose caller goes away after its first batch went in.
	canceled, cancel := context.WithCancel(ctx)
	defer cancel()
	cancelMidway := func(yield func(rel.Relationship, error) bool) {
		for i, r := range many {
			if i == bulkBatch+1 {
				cancel()
			}
			if !yield(r, nil) {
				return
			}
		}
	}

	var exists *store.AlreadyExistsError
	var invalid *store.InvalidUpdateError
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		rels   iter.Seq2[rel.Relationship, error]
		target any
	}{
		{"existing", ctx, storetest.RelSeq(append(many[:50:50], existing), nil), &exists},
		{"existing expired", ctx, storetest.RelSeq(append(many[:50:50], expired), nil), &exists},
		{"duplicate in one batch", ctx, storetest.RelSeq(append(many[:5:5], many[3]), nil), &exists},
		{"duplicate across batches", ctx, storetest.RelSeq(append(slices.Clone(many), many[3]), nil), &exists},
		{"invalid", ctx, storetest.RelSeq(append(slices.Clone(many), nameless), nil), &invalid},
		{"source error", ctx, storetest.RelSeq(many, errSource), errSource},
		{"canceled", canceled, cancelMidway, context.Canceled},
	} {
		_, err := s.BulkLoad(tc.ctx, tc.rels)
		if e, ok := tc.target.(error); ok && !errors.Is(err, e) || !ok && !errors.As(err, tc.target) {
			t.Fatalf("%s: bulk load returned %v, want %T", tc.name, err, tc.target)
		}
		if h, _ := s.HeadRevision(ctx); h != head {
			t.Fatalf("%s: failed bulk load moved the head from %d to %d", tc.name, head, h)
		}
		if after := s.Stats(); after != before {
			t.Fatalf("%s: failed bulk load left %+v, want %+v", tc.name, after, before)
		}
		checkInvariants(t, s)
	}
	// The store still works, and the load can be done once its input is right.
	rev, err := s.BulkLoad(ctx, storetest.RelSeq(many, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, rev, store.Filter{ResourceType: "document"}); len(got) != len(many)+1 {
		t.Fatalf("read %d documents after the load, want %d", len(got), len(many)+1)
	}
	checkInvariants(t, s)
}

// BenchmarkIndexResize rebuilds the exact and forward indexes of 1.5 million
// relationships, as a load does each time one fills up.
func BenchmarkIndexResize(b *testing.B) {
	s := New(Options{})
	_, err := s.BulkLoad(context.Background(), func(yield func(rel.Relationship, error) bool) {
		for i := range 1_500_000 {
			r := rel.Relationship{
				Resource: rel.ObjectRef{Type: "document", ID: fmt.Sprintf("d%d", i/7)}, Relation: "viewer",
				Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprintf("u%d", (i*7919)%100_000)}},
			}
			if !yield(r, nil) {
				return
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s.exact.resize(&s.recs)
		s.fwd.resize(&s.recs)
	}
}
