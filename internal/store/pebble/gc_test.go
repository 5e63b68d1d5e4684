package pebble

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

func TestGC(t *testing.T) {
	ctx := context.Background()
	setVar(t, &gcChunk, 2) // several batches per log
	c := newClock()
	dir := t.TempDir()
	s := openDir(t, dir, Options{GCWindow: time.Hour, GCInterval: -1, Now: c.Now})
	doc := func(id string) rel.Relationship { return relationship("document", id, "viewer", "user", "u", "") }
	expiring := doc("e")
	soon := c.Now().Add(10 * time.Minute)
	expiring.Expiration = &soon

	if _, err := s.WriteSchema(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	r1 := mustWrite(t, s, store.Create, doc("a"), doc("b"), doc("c"), doc("d"), expiring)
	caveated := doc("c")
	caveated.Caveat = &rel.Caveat{Name: "k"}
	r2, err := s.Write(ctx, nil, []store.Update{
		{Op: store.Delete, Relationship: doc("a")}, {Op: store.Delete, Relationship: doc("b")}, {Op: store.Touch, Relationship: caveated},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := s.WriteSchema(ctx, "s2", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.advance(30 * time.Minute)
	r4 := mustWrite(t, s, store.Delete, doc("d"))

	res, err := s.GC(ctx)
	if err != nil || res.Relationships != 0 || res.Horizon != firstRevision {
		t.Fatalf("GC inside the window: %+v, %v; want nothing collected", res, err)
	}
	expectKeys(t, s, r1, store.Filter{}, "document:a#viewer@user:u", "document:b#viewer@user:u", "document:c#viewer@user:u", "document:d#viewer@user:u")

	c.advance(45 * time.Minute) // r1..r3 were superseded 75 minutes ago, r4 45
	if _, err := s.Reader(ctx, r2); !errors.Is(err, store.ErrRevisionGone) {
		t.Fatalf("reader at %d past the window, before GC: %v, want ErrRevisionGone", r2, err)
	}
	res, err = s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Versions ended at r2 (a, b, the uncaveated c) and the long-expired e go.
	if res.Horizon != r3 || res.Relationships != 4 || res.Revisions != int(r3-firstRevision) {
		t.Fatalf("GC: %+v; want horizon %d, 4 relationships, %d revisions", res, r3, r3-firstRevision)
	}
	for _, rev := range []store.Revision{firstRevision, r1, r2} {
		if _, err := s.Reader(ctx, rev); !errors.Is(err, store.ErrRevisionGone) {
			t.Fatalf("reader at %d after GC: %v, want ErrRevisionGone", rev, err)
		}
	}
	expectKeys(t, s, r3, store.Filter{IncludeExpired: true}, "document:c#viewer@user:u", "document:d#viewer@user:u")
	expectKeys(t, s, r4, store.Filter{IncludeExpired: true}, "document:c#viewer@user:u")
	if got := readAll(t, s, r4, store.Filter{}); len(got) != 1 || got[0].Caveat == nil || got[0].Caveat.Name != "k" {
		t.Fatalf("after GC read %+v", got)
	}
	// Physically gone: c (new) and d (ended at r4, still visible at r3) remain.
	for tag, want := range map[byte]int{tagForward: 2, tagReverse: 2, tagEnded: 1, tagExpiring: 0, tagCommit: 2, tagSchema: 1} {
		if n := countKeys(t, s, tag); n != want {
			t.Fatalf("after GC %d keys with tag %q remain, want %d", n, tag, want)
		}
	}
	schemaAt := func(rev store.Revision) string {
		r, err := s.Reader(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		text, err := r.Schema(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	if schemaAt(r3) != "s2" || schemaAt(r4) != "s2" {
		t.Fatalf("schema after GC: %q at %d, %q at %d", schemaAt(r3), r3, schemaAt(r4), r4)
	}

	// The oldest revision survives a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir, Options{GCWindow: time.Hour, GCInterval: -1, Now: c.Now})
	if _, err := s.Reader(ctx, r3-1); !errors.Is(err, store.ErrRevisionGone) {
		t.Fatalf("reader at %d after reopen: %v, want ErrRevisionGone", r3-1, err)
	}
	expectKeys(t, s, r3, store.Filter{}, "document:c#viewer@user:u", "document:d#viewer@user:u")
}

// TestQueryDuringGC checks that a query started before its revision is collected
// finishes with the full answer, while later queries at that revision fail.
func TestQueryDuringGC(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openTest(t, Options{GCWindow: time.Hour, GCInterval: -1, Now: c.Now})
	var rs []rel.Relationship
	for i := range 100 {
		rs = append(rs, relationship("document", hex8(uint32(i)), "viewer", "user", "u", ""))
	}
	r1 := mustWrite(t, s, store.Create, rs...)
	mustWrite(t, s, store.Delete, rs...)
	r, err := s.Reader(ctx, r1)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iter.Pull2(r.Query(ctx, store.Filter{}, store.QueryOptions{}))
	defer stop()
	if _, err, ok := next(); !ok || err != nil {
		t.Fatalf("first item: %v, %v", ok, err)
	}
	c.advance(2 * time.Hour)
	if res, err := s.GC(ctx); err != nil || res.Relationships != 100 {
		t.Fatalf("GC: %+v, %v; want 100 relationships collected", res, err)
	}
	n := 1
	for {
		_, err, ok := next()
		if !ok {
			break
		}
		if err != nil {
			t.Fatalf("query in flight during GC failed after %d items: %v", n, err)
		}
		n++
	}
	if n != 100 {
		t.Fatalf("query in flight during GC read %d items, want 100", n)
	}
	for _, err := range r.Query(ctx, store.Filter{}, store.QueryOptions{}) {
		if !errors.Is(err, store.ErrRevisionGone) {
			t.Fatalf("query at a collected revision: %v, want ErrRevisionGone", err)
		}
	}
	if _, err := r.Schema(ctx); !errors.Is(err, store.ErrRevisionGone) {
		t.Fatalf("schema at a collected revision: %v, want ErrRevisionGone", err)
	}
}

// TestBackgroundGC lets the collector goroutine do the work; TestMain's leak check
// verifies that Close stops it.
func TestBackgroundGC(t *testing.T) {
	s := openTest(t, Options{GCWindow: time.Millisecond, GCInterval: 5 * time.Millisecond})
	r := relationship("document", "a", "viewer", "user", "u", "")
	mustWrite(t, s, store.Create, r)
	mustWrite(t, s, store.Delete, r)
	deadline := time.Now().Add(10 * time.Second)
	for countKeys(t, s, tagForward) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background collector did not remove a deleted relationship within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s.oldest.Load() < 2 {
		t.Fatalf("the background collector left the oldest revision at %d", s.oldest.Load())
	}
}
