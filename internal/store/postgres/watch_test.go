package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
)

// Under concurrent writers a watcher gets every revision exactly once, in order, with
// no revision skipped: each write is one revision with one touch.
func TestWatchConcurrentWriters(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start, err := s.HeadRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r := docRel(fmt.Sprintf("w%d-%d", w, i), "u")
				if _, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: r}}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	seen := map[string]bool{}
	want := start + 1
	for c, err := range s.Watch(ctx, start, store.WatchOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Revision != want || len(c.Updates) != 1 || c.Updates[0].Op != store.ChangeTouch {
			t.Fatalf("got revision %d with %d updates, want revision %d with one touch", c.Revision, len(c.Updates), want)
		}
		k := rel.String(c.Updates[0].Relationship)
		if seen[k] {
			t.Fatalf("%s delivered twice", k)
		}
		seen[k] = true
		if want++; len(seen) == writers*each {
			break
		}
	}
	wg.Wait()
}

// A watch from a revision the collector forgot fails with ErrRevisionGone.
func TestWatchFromCollectedRevision(t *testing.T) {
	s, _ := open(t, postgres.Options{GCWindow: time.Millisecond})
	ctx := context.Background()
	old, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: docRel("a", "u")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: docRel("b", "u")}}, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	for _, err := range s.Watch(ctx, old, store.WatchOptions{}) {
		if !errors.Is(err, store.ErrRevisionGone) {
			t.Fatalf("watch from a collected revision: %v, want ErrRevisionGone", err)
		}
		break
	}
}

// A bulk load is one revision whose every relationship a watcher sees as a touch.
func TestWatchBulkLoad(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start, err := s.HeadRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := s.BulkLoad(ctx, func(yield func(rel.Relationship, error) bool) {
		for i := range 10 {
			if !yield(docRel(fmt.Sprint(i), "u"), nil) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for c, err := range s.Watch(ctx, start, store.WatchOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Revision != rev || len(c.Updates) != 10 {
			t.Fatalf("got revision %d with %d updates, want %d with 10", c.Revision, len(c.Updates), rev)
		}
		break
	}
}
