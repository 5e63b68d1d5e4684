package memory

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/changefeed"
)

func viewer(id string) rel.Relationship {
	return rel.Relationship{
		Resource: rel.ObjectRef{Type: "document", ID: id}, Relation: "viewer",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}},
	}
}

// A watcher paused for longer than the feed holds resumes from the records' history
// and still gets every change once, in order; so does one whose next revision is a
// write too large for the feed.
func TestWatchResumesFromHistoryPastTheFeed(t *testing.T) {
	s, _ := newTestStore(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start, _ := s.HeadRevision(ctx)
	next, stop := iter.Pull2(s.Watch(ctx, start, store.WatchOptions{}))
	defer stop()
	n := changefeed.DefaultMaxRevisions + 100
	for i := range n {
		writeUpdates(t, s, store.Update{Op: store.Create, Relationship: viewer(fmt.Sprint(i))})
	}
	// One revision with more updates than the feed keeps, touching one earlier
	// relationship and deleting another.
	big := []store.Update{{Op: store.Delete, Relationship: viewer("0")}}
	for i := range changefeed.DefaultMaxUpdates {
		big = append(big, store.Update{Op: store.Create, Relationship: viewer(fmt.Sprintf("big%d", i))})
	}
	bigRev := writeUpdates(t, s, big...)
	for i := range n {
		c, err, _ := next()
		if err != nil {
			t.Fatal(err)
		}
		if c.Revision != start+store.Revision(i)+1 || len(c.Updates) != 1 || c.Updates[0].Relationship.Resource.ID != fmt.Sprint(i) {
			t.Fatalf("change %d: got revision %d with %d updates", i, c.Revision, len(c.Updates))
		}
	}
	c, err, _ := next()
	if err != nil || c.Revision != bigRev || len(c.Updates) != len(big) {
		t.Fatalf("big revision: got %d with %d updates (%v); want %d with %d", c.Revision, len(c.Updates), err, bigRev, len(big))
	}
	if u := c.Updates[0]; u.Op != store.ChangeDelete || u.Relationship.Resource.ID != "0" {
		t.Fatalf("big revision's first update is %v %s, want the delete of document:0", u.Op, rel.String(u.Relationship))
	}
}

// A watch from a revision older than the GC window fails with ErrRevisionGone.
func TestWatchFromCollectedRevision(t *testing.T) {
	s, clk := newTestStore(t, time.Hour)
	ctx := context.Background()
	old := writeUpdates(t, s, store.Update{Op: store.Create, Relationship: viewer("a")})
	writeUpdates(t, s, store.Update{Op: store.Create, Relationship: viewer("b")})
	clk.advance(2 * time.Hour)
	s.GC(clk.Now())
	for _, err := range s.Watch(ctx, old, store.WatchOptions{}) {
		if !errors.Is(err, store.ErrRevisionGone) {
			t.Fatalf("watch from a collected revision: %v, want ErrRevisionGone", err)
		}
		break
	}
}

func writeUpdates(t *testing.T, s *Store, us ...store.Update) store.Revision {
	t.Helper()
	rev, err := s.Write(context.Background(), nil, us, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// The history rebuilt from the records is exactly what the feed recorded, over random
// touches, deletes, caveats, expirations, filtered deletes and schema writes.
func TestWatchHistoryMatchesFeed(t *testing.T) {
	s, _ := newTestStore(t, time.Hour)
	ctx := context.Background()
	start, _ := s.HeadRevision(ctx)
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		randomWatchWrite(t, s, rnd)
	}
	head, _ := s.HeadRevision(ctx)
	fed := s.feed.Read(start, head, int(head))
	if fed.Gap != 0 || fed.Through != head {
		t.Fatalf("feed read: through %d gap %d, want through %d", fed.Through, fed.Gap, head)
	}
	s.mu.RLock()
	rebuilt := s.historyLocked(uint64(start), uint64(head))
	s.mu.RUnlock()
	if f, r := describeAll(fed.Changes), describeAll(rebuilt); f != r {
		t.Fatalf("rebuilt history differs from the feed:\nfeed:\n%s\nrebuilt:\n%s", f, r)
	}
	if len(rebuilt) < 100 {
		t.Fatalf("only %d revisions changed something; the test writes too little", len(rebuilt))
	}
}

func describeAll(cs []store.Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "@%d schema=%v", c.Revision, c.SchemaChanged)
		for _, u := range c.Updates {
			b.WriteString(" " + u.Op.String() + " " + rel.String(u.Relationship))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// randomWatchWrite makes one random write over a small universe, so that touches
// replace, deletes hit and miss, and filtered deletes and schema writes happen.
func randomWatchWrite(t *testing.T, s *Store, rnd *rand.Rand) {
	ctx := context.Background()
	var err error
	switch rnd.IntN(10) {
	case 0:
		_, err = s.WriteSchema(ctx, fmt.Sprint("schema ", rnd.IntN(100)), nil)
	case 1:
		_, _, _, err = s.DeleteByFilter(ctx, nil, store.Filter{ResourceType: "document", ResourceIDs: []string{fmt.Sprint(rnd.IntN(6))}}, 0, false)
	default:
		seen := map[rel.Key]bool{}
		var us []store.Update
		for range 1 + rnd.IntN(4) {
			r := viewer(fmt.Sprint(rnd.IntN(6)))
			r.Subject.Object.ID = fmt.Sprint(rnd.IntN(3))
			switch rnd.IntN(4) {
			case 0:
				r.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"n": float64(rnd.IntN(2))}}
			case 1:
				exp := time.Date(2100, 1, 1, 0, 0, rnd.IntN(2), 0, time.UTC)
				r.Expiration = &exp
			}
			if seen[r.Key()] {
				continue
			}
			seen[r.Key()] = true
			op := store.Touch
			if rnd.IntN(3) == 0 {
				op = store.Delete
			}
			us = append(us, store.Update{Op: op, Relationship: r})
		}
		_, err = s.Write(ctx, nil, us, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
}
