package revision

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/store"
)

// TestQuantizerFetchesHeadOncePerWindow: concurrent requests of one window share a
// single head lookup.
func TestQuantizerFetchesHeadOncePerWindow(t *testing.T) {
	var calls atomic.Int32
	q := NewQuantizer(time.Hour, 0, func(context.Context) (store.Revision, error) {
		calls.Add(1)
		time.Sleep(10 * time.Millisecond)
		return 42, nil
	})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if rev, err := q.Revision(context.Background()); err != nil || rev != 42 {
				t.Errorf("revision: %d, %v", rev, err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n > 2 { // 2: the window may turn over during the test
		t.Errorf("%d head lookups for one window, want 1", n)
	}
}

// TestQuantizerSmearsTheMove: just after a window starts, requests are split between
// the previous window's revision and the new head; later in the window all of them
// read the new one, and the head is fetched once per window throughout.
func TestQuantizerSmearsTheMove(t *testing.T) {
	var head, fetches atomic.Int64
	q := NewQuantizer(time.Second, 50, func(context.Context) (store.Revision, error) {
		fetches.Add(1)
		return store.Revision(head.Load()), nil
	})
	base := time.Unix(1_000_000, 0) // a window boundary
	var clock atomic.Int64
	q.now = func() time.Time { return base.Add(time.Duration(clock.Load())) }
	read := func() store.Revision {
		t.Helper()
		rev, err := q.Revision(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}

	head.Store(7)
	clock.Store(int64(-400 * time.Millisecond)) // late in the previous window
	for range 20 {
		if rev := read(); rev != 7 {
			t.Fatalf("previous window read %d, want 7", rev)
		}
	}
	head.Store(9)
	clock.Store(int64(100 * time.Millisecond)) // early in the new window
	counts := map[store.Revision]int{}
	for range 400 {
		counts[read()]++
	}
	if counts[7] == 0 || counts[9] == 0 || len(counts) != 2 {
		t.Errorf("early in a window, revisions read %v: want a mix of 7 (the old window) and 9 (the new head)", counts)
	}
	head.Store(11) // the new window's revision is fixed: later writes wait for the next
	clock.Store(int64(700 * time.Millisecond))
	for range 20 {
		if rev := read(); rev != 9 {
			t.Fatalf("late in the window read %d, want the window's revision 9", rev)
		}
	}
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d head fetches over two windows, want 2", n)
	}
}

// TestQuantizerIdleGap: after an idle window, a request smeared into it reads the
// newest window's revision instead of fetching the head again.
func TestQuantizerIdleGap(t *testing.T) {
	var fetches atomic.Int64
	q := NewQuantizer(time.Second, 100, func(context.Context) (store.Revision, error) {
		return store.Revision(fetches.Add(1)), nil
	})
	base := time.Unix(2_000_000, 0)
	q.now = func() time.Time { return base.Add(500 * time.Millisecond) } // always the same window
	q.maxStaleness = 0
	first, _ := q.Revision(context.Background()) // the window's revision, unsmeared
	q.maxStaleness = time.Second
	for range 200 { // smeared up to a whole window back, half of these fall in the idle one
		if rev, err := q.Revision(context.Background()); err != nil || rev != first {
			t.Fatalf("revision %d, %v; want %d", rev, err, first)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d head fetches, want 1", n)
	}
}
