package changefeed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

func touchOf(id string) store.RelationshipChange {
	return store.RelationshipChange{Op: store.ChangeTouch, Relationship: rel.Relationship{
		Resource: rel.ObjectRef{Type: "doc", ID: id}, Relation: "viewer",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}},
	}}
}

func change(rev store.Revision, n int) store.Change {
	c := store.Change{Revision: rev}
	for i := range n {
		c.Updates = append(c.Updates, touchOf(string(rune('a'+i))))
	}
	return c
}

func revs(cs []store.Change) []store.Revision {
	var out []store.Revision
	for _, c := range cs {
		out = append(out, c.Revision)
	}
	return out
}

func TestFeedReadsInOrderUpToVisible(t *testing.T) {
	f := New(10, 100, 100)
	f.Append(change(11, 1), false)
	f.Append(change(12, 0), false) // changed nothing: covered, not returned
	f.Append(change(13, 2), false)
	b := f.Read(10, 12, 100)
	if got := revs(b.Changes); len(got) != 1 || got[0] != 11 || b.Through != 12 || b.Gap != 0 {
		t.Fatalf("read up to visible 12: changes %v through %d gap %d", got, b.Through, b.Gap)
	}
	b = f.Read(12, 20, 100)
	if got := revs(b.Changes); len(got) != 1 || got[0] != 13 || b.Through != 13 {
		t.Fatalf("read after 12: changes %v through %d", got, b.Through)
	}
	if b := f.Read(13, 20, 100); b.Through != 13 || len(b.Changes) != 0 || b.Gap != 0 {
		t.Fatalf("read at the end: %+v", b)
	}
	if b := f.Read(10, 20, 1); b.Through != 11 || len(b.Changes) != 1 {
		t.Fatalf("read of at most one revision: %+v", b)
	}
}

func TestFeedSendsReadersToHistory(t *testing.T) {
	f := New(0, 3, 5)
	for rev := store.Revision(1); rev <= 5; rev++ {
		f.Append(change(rev, 1), false)
	}
	// Revisions 1 and 2 were dropped (at most 3 kept).
	if b := f.Read(0, 5, 100); b.Gap != 2 || b.Through != 0 || len(b.Changes) != 0 {
		t.Fatalf("read of dropped revisions: %+v, want gap 2", b)
	}
	if b := f.Read(2, 5, 100); b.Gap != 0 || b.Through != 5 || len(b.Changes) != 3 {
		t.Fatalf("read of kept revisions: %+v", b)
	}
	// A revision with too many updates is kept as a marker to read from history.
	f.Append(change(6, 6), false)
	f.Append(change(7, 1), false)
	if b := f.Read(5, 7, 100); b.Gap != 6 {
		t.Fatalf("read of an oversized revision: %+v, want gap 6", b)
	}
	if b := f.Read(6, 7, 100); b.Gap != 0 || b.Through != 7 || len(b.Changes) != 1 {
		t.Fatalf("read after the oversized revision: %+v", b)
	}
	// A reader before a partial revision stops in front of it.
	f.Append(change(8, 1), true)
	if b := f.Read(6, 8, 100); b.Through != 7 || b.Gap != 0 {
		t.Fatalf("read up to a partial revision: %+v, want through 7", b)
	}
	// The update bound drops old revisions too: 5 updates at most.
	f.Append(change(9, 5), false)
	if b := f.Read(8, 9, 100); b.Through != 9 || len(b.Changes) != 1 {
		t.Fatalf("read of the newest revision: %+v", b)
	}
	if b := f.Read(7, 9, 100); b.Gap == 0 {
		t.Fatalf("read of revisions dropped for the update bound: %+v, want a gap", b)
	}
	// A revision that skips one empties the feed rather than hide the missing one.
	f.Append(change(11, 1), false)
	if b := f.Read(9, 11, 100); b.Gap != 10 {
		t.Fatalf("read across a skipped revision: %+v, want gap 10", b)
	}
}

func TestFeedWakesWaiters(t *testing.T) {
	f := New(0, 0, 0)
	w := f.Wait()
	select {
	case <-w:
		t.Fatal("woken before any append")
	default:
	}
	f.Append(change(1, 1), false)
	<-w
	w = f.Wait()
	f.Notify()
	<-w
}

// The watch loop yields changes, then checkpoints at its position while idle, polls
// when the source has no wake-up, and ends with the source's or the context's error.
func TestWatchLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	calls := 0
	boom := errors.New("boom")
	next := func(ctx context.Context, after store.Revision) (Step, error) {
		calls++
		switch {
		case calls == 1:
			return Step{Changes: []store.Change{change(2, 1), change(4, 1)}, Through: 4, More: true}, nil
		case calls < 5:
			return Step{Through: 5}, nil // caught up at 5; polled
		}
		return Step{}, boom
	}
	var got []store.Change
	var err error
	for c, e := range Watch(ctx, next, 1, store.WatchOptions{CheckpointInterval: time.Millisecond}, time.Millisecond) {
		if e != nil {
			err = e
			break
		}
		got = append(got, c)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("watch ended with %v, want the source's error", err)
	}
	if len(got) < 3 || got[0].Revision != 2 || got[1].Revision != 4 || !got[2].Checkpoint || got[2].Revision != 5 {
		t.Fatalf("watch yielded %+v, want changes at 2 and 4, then checkpoints at 5", got)
	}
	for _, c := range got[2:] {
		if !c.Checkpoint || c.Revision != 5 {
			t.Fatalf("after catching up the watch yielded %+v, want checkpoints at 5", c)
		}
	}

	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	for _, e := range Watch(cctx, next, 1, store.WatchOptions{}, time.Millisecond) {
		if !errors.Is(e, context.Canceled) {
			t.Fatalf("cancelled watch ended with %v", e)
		}
	}
}
