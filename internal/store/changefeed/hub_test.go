package changefeed

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/store"
)

// feedSource is a store's watch over a Feed that holds all its history, as the memory
// and pebble stores' watches are, counting the watches opened on it.
type feedSource struct {
	f       *Feed
	watches atomic.Int64
}

func newFeedSource() *feedSource { return &feedSource{f: New(0, 1<<20, 1<<20)} }

func (s *feedSource) head(context.Context) (store.Revision, error) { return s.last(), nil }

func (s *feedSource) last() store.Revision {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.f.last
}

func (s *feedSource) Watch(ctx context.Context, after store.Revision, opts store.WatchOptions) iter.Seq2[store.Change, error] {
	s.watches.Add(1)
	next := func(ctx context.Context, after store.Revision) (Step, error) {
		wake := s.f.Wait()
		return s.f.Step(after, s.last(), wake, func(store.Revision) ([]store.Change, error) {
			return nil, store.ErrRevisionGone
		})
	}
	return Watch(ctx, next, after, opts, 0)
}

// commit appends revision rev with one update.
func (s *feedSource) commit(rev store.Revision) { s.f.Append(change(rev, 1), false) }

// collect reads w's changes until it has want revisions' changes, skipping checkpoints.
func collect(ctx context.Context, w store.Watcher, after store.Revision, want int) ([]store.Revision, error) {
	var got []store.Revision
	for c, err := range w.Watch(ctx, after, store.WatchOptions{}) {
		if err != nil {
			return got, err
		}
		got = append(got, c.Revision)
		if len(got) == want {
			return got, nil
		}
	}
	return got, nil
}

// TestHubServesManyWatchersWithOneUpstream: fifty watchers from the head and one from
// an older revision each get every change once, in order, and the store is watched
// once for all of those from the head (the older one reads the store directly until
// it catches up, then joins).
func TestHubServesManyWatchersWithOneUpstream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src := newFeedSource()
	for rev := store.Revision(1); rev <= 3; rev++ {
		src.commit(rev)
	}
	hub := NewHub(src, src.head, time.Millisecond, 0)
	const watchers = 50
	var wg sync.WaitGroup
	results := make([][]store.Revision, watchers+1)
	errs := make([]error, watchers+1)
	for i := range watchers {
		wg.Go(func() { results[i], errs[i] = collect(ctx, hub, 3, 5) })
	}
	wg.Go(func() { results[watchers], errs[watchers] = collect(ctx, hub, 1, 7) })
	for hubSubs(hub) < watchers+1 { // every watcher is reading before the commits
		time.Sleep(time.Millisecond)
	}
	for rev := store.Revision(4); rev <= 8; rev++ {
		src.commit(rev)
	}
	wg.Wait()
	for i, got := range results {
		want := []store.Revision{4, 5, 6, 7, 8}
		if i == watchers {
			want = []store.Revision{2, 3, 4, 5, 6, 7, 8}
		}
		if errs[i] != nil || !equalRevs(got, want) {
			t.Fatalf("watcher %d: %v (%v), want %v", i, got, errs[i], want)
		}
	}
	// One upstream for the fifty, one direct catch-up for the late one.
	if n := src.watches.Load(); n != 2 {
		t.Errorf("the store was watched %d times for %d watchers, want 2 (one upstream, one catch-up)", n, watchers+1)
	}
}

func hubSubs(h *Hub) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subs
}

func equalRevs(a, b []store.Revision) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHubSlowWatcherLagsAlone: a watcher that stops pulling while the log moves past
// what it has read ends with ErrWatchLagging (never a silent gap), and does not hold
// back another watcher, which gets every change.
func TestHubSlowWatcherLagsAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src := newFeedSource()
	hub := NewHub(src, src.head, time.Millisecond, 4)
	go func() {
		for hubSubs(hub) == 0 { // the slow watcher is reading
			time.Sleep(time.Millisecond)
		}
		src.commit(1)
	}()
	var slowErr error
	var slowGot []store.Revision
	for c, err := range hub.Watch(ctx, 0, store.WatchOptions{}) {
		if err != nil {
			slowErr = err
			break
		}
		slowGot = append(slowGot, c.Revision)
		if len(slowGot) > 1 {
			continue
		}
		// Paused on the first change: ten more commits pass through the log of four,
		// each taken by a fast watcher before the next.
		fast := make(chan store.Revision)
		go func() {
			defer close(fast)
			for c, err := range hub.Watch(ctx, 1, store.WatchOptions{}) {
				if err != nil {
					return
				}
				fast <- c.Revision
				if c.Revision == 11 {
					return
				}
			}
		}()
		for hubSubs(hub) < 2 {
			time.Sleep(time.Millisecond)
		}
		for rev := store.Revision(2); rev <= 11; rev++ {
			src.commit(rev)
			if got := <-fast; got != rev {
				t.Fatalf("the fast watcher got revision %d, want %d", got, rev)
			}
		}
	}
	if !errors.Is(slowErr, store.ErrWatchLagging) || !equalRevs(slowGot, []store.Revision{1}) {
		t.Fatalf("the slow watcher got %v, then %v; want revision 1, then ErrWatchLagging", slowGot, slowErr)
	}
}
