package pebble

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
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

// TestReusedIteratorsAcrossGC: a reader at a retained revision reads exactly its state
// after later writes and a collection, one at a forgotten revision fails although
// idle iterators hold its data, and an iterator in use during a collection is not
// kept, so later queries do not see what the collection removed.
func TestReusedIteratorsAcrossGC(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openTest(t, Options{GCWindow: time.Hour, GCInterval: -1, Now: c.Now})
	all := store.Filter{ResourceType: "doc", IncludeExpired: true}
	expiring := relationship("doc", "e", "viewer", "user", "z", "")
	soon := c.Now().Add(time.Minute)
	expiring.Expiration = &soon
	r1 := mustWrite(t, s, store.Create, relationship("doc", "a", "viewer", "user", "x", ""),
		relationship("doc", "c", "viewer", "user", "x", ""), expiring)
	forgotten, err := s.Reader(ctx, r1) // a reader made while r1 was readable
	if err != nil {
		t.Fatal(err)
	}
	r2 := mustWrite(t, s, store.Delete, relationship("doc", "a", "viewer", "user", "x", ""))
	c.advance(2 * time.Hour)
	r3 := mustWrite(t, s, store.Create, relationship("doc", "b", "viewer", "user", "y", ""))
	expectKeys(t, s, r2, all, "doc:c#viewer@user:x", "doc:e#viewer@user:z")
	if got := keysOf(queryAll(t, forgotten, all)); len(got) != 3 {
		t.Fatalf("the reader at %d before GC reads %q, want doc:a, doc:c and doc:e", r1, got)
	}
	inUse, err := s.iters.get(s, uint64(r3))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.GC(ctx)
	if err != nil || res.Horizon != r2 || res.Relationships != 2 {
		t.Fatalf("GC: %+v, %v; want horizon %d, 2 relationships (a, e) removed", res, err, r2)
	}
	s.iters.put(inUse)
	if n := len(s.iters.idle); n != 0 {
		t.Fatalf("%d iterators from before the collection kept", n)
	}
	for range 3 {
		expectKeys(t, s, r3, all, "doc:b#viewer@user:y", "doc:c#viewer@user:x")
		expectKeys(t, s, r2, all, "doc:c#viewer@user:x") // doc:e was collected
		for _, err := range forgotten.Query(ctx, all, store.QueryOptions{}) {
			if !errors.Is(err, store.ErrRevisionGone) {
				t.Fatalf("query at the forgotten revision %d: %v, want ErrRevisionGone", r1, err)
			}
		}
	}
	if len(s.iters.idle) == 0 {
		t.Fatal("no iterator kept after the collection")
	}
}

func queryAll(t testing.TB, r store.Reader, f store.Filter) []rel.Relationship {
	t.Helper()
	var out []rel.Relationship
	for item, err := range r.Query(context.Background(), f, store.QueryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, item.Relationship)
	}
	return out
}

// TestIterPoolBounds: a full pool keeps the newest iterators, and idle iterators are
// closed after maxIterAge without any query to notice.
func TestIterPoolBounds(t *testing.T) {
	setVar(t, &maxIterAge, 200*time.Millisecond)
	s := openTest(t, Options{GCInterval: -1})
	var stale []pooledIter
	for range maxIdleIters {
		pi, err := s.iters.get(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		stale = append(stale, pi)
	}
	for _, pi := range stale {
		s.iters.put(pi)
	}
	rev := mustWrite(t, s, store.Create, relationship("doc", "a", "viewer", "user", "x", ""))
	expectKeys(t, s, rev, store.Filter{}, "doc:a#viewer@user:x")
	heads := 0
	for _, pi := range s.iters.idle {
		if pi.head >= uint64(rev) {
			heads++
		}
	}
	if len(s.iters.idle) != maxIdleIters || heads != 1 {
		t.Fatalf("%d idle iterators, %d of them at the head; want %d, 1", len(s.iters.idle), heads, maxIdleIters)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.iters.mu.Lock()
		n := len(s.iters.idle)
		s.iters.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle iterators left open long after their age", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReusedIteratorsConcurrent: readers at every published revision, racing writers
// and collections that drop the pool, each read exactly their revision's state.
func TestReusedIteratorsConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{GCInterval: -1})
	const writes = 100
	var revs [writes]atomic.Uint64 // revs[i] holds the revision that wrote document i
	var written atomic.Int64
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		for i := range writes {
			r := relationship("doc", strconv.Itoa(i), "viewer", "user", "x", "")
			rev, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: r}}, nil)
			if err == nil && i%10 == 0 {
				_, err = s.GC(ctx)
			}
			if err != nil {
				t.Error(err)
				return
			}
			revs[i].Store(uint64(rev))
			written.Store(int64(i + 1))
		}
	})
	for g := range 4 {
		wg.Go(func() {
			for j := g; !done.Load(); j++ {
				if n := written.Load(); n > 0 {
					i := j % int(n)
					if err := countAt(ctx, s, revs[i].Load(), i+1); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// countAt checks that want documents exist at rev.
func countAt(ctx context.Context, s *Store, rev uint64, want int) error {
	r, err := s.Reader(ctx, store.Revision(rev))
	if err != nil {
		return err
	}
	got := 0
	for _, err := range r.Query(ctx, store.Filter{ResourceType: "doc"}, store.QueryOptions{}) {
		if err != nil {
			return err
		}
		got++
	}
	if got != want {
		return fmt.Errorf("%d documents at revision %d, want %d", got, rev, want)
	}
	return nil
}
