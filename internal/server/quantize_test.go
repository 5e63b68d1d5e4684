package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/store"
)

func minimizeLatency() *v1.Consistency {
	return &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}}
}

func TestQuantizedReads(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow, c.MaxStalenessPercent = time.Hour, -1 })
	ts.writeSchema(t, docSchema)
	granted := ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	view := func(c *v1.Consistency) *v1.CheckPermissionResponse {
		t.Helper()
		resp, err := ts.check(t, c, obj("document", "readme"), "view", sub("user", "zed", ""))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if got := view(minimizeLatency()); got.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION || got.CheckedAt.Token != granted.Token {
		t.Fatalf("first minimize_latency read of the window: %v, want the head at %s", got, granted.Token)
	}
	del, err := ts.perms.DeleteRelationships(ctxT(t), &v1.DeleteRelationshipsRequest{
		RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "readme"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := view(minimizeLatency()); got.CheckedAt.Token != granted.Token {
		t.Errorf("minimize_latency within the window read %s, want the window's revision %s", got.CheckedAt.Token, granted.Token)
	}
	atLeast := &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: del.DeletedAt}}
	if got := view(atLeast); got.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION || got.CheckedAt.Token != del.DeletedAt.Token {
		t.Errorf("at_least_as_fresh the delete: %v", got)
	}
	if got := view(fullyConsistent()); got.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION {
		t.Errorf("fully_consistent after the delete: %v", got)
	}
}

func TestQuantizedReadsMoveOn(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = 20 * time.Millisecond })
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := ts.check(t, minimizeLatency(), obj("document", "readme"), "view", sub("user", "zed", ""))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Permissionship == v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("minimize_latency reads never saw the write")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestQuantizerFetchesHeadOncePerWindow: concurrent requests of one window share a
// single head lookup.
func TestQuantizerFetchesHeadOncePerWindow(t *testing.T) {
	var calls atomic.Int32
	q := newQuantizer(time.Hour, 0, func(context.Context) (store.Revision, error) {
		calls.Add(1)
		time.Sleep(10 * time.Millisecond)
		return 42, nil
	})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if rev, err := q.revision(context.Background()); err != nil || rev != 42 {
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
	q := newQuantizer(time.Second, 50, func(context.Context) (store.Revision, error) {
		fetches.Add(1)
		return store.Revision(head.Load()), nil
	})
	base := time.Unix(1_000_000, 0) // a window boundary
	var clock atomic.Int64
	q.now = func() time.Time { return base.Add(time.Duration(clock.Load())) }
	read := func() store.Revision {
		t.Helper()
		rev, err := q.revision(context.Background())
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
	q := newQuantizer(time.Second, 100, func(context.Context) (store.Revision, error) {
		return store.Revision(fetches.Add(1)), nil
	})
	base := time.Unix(2_000_000, 0)
	q.now = func() time.Time { return base.Add(500 * time.Millisecond) } // always the same window
	q.maxStaleness = 0
	first, _ := q.revision(context.Background()) // the window's revision, unsmeared
	q.maxStaleness = time.Second
	for range 200 { // smeared up to a whole window back, half of these fall in the idle one
		if rev, err := q.revision(context.Background()); err != nil || rev != first {
			t.Fatalf("revision %d, %v; want %d", rev, err, first)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d head fetches, want 1", n)
	}
}

// TestAtLeastAsFreshSeesEveryWrite: with the default window and the answer cache on,
// a check at least as fresh as a write's token reflects that write, every time, while
// the minimize_latency reads in between may lag.
func TestAtLeastAsFreshSeesEveryWrite(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, docSchema)
	r := relationship("document", "readme", "viewer", "user", "amy", "")
	for i := range 30 {
		var tok *v1.ZedToken
		want := v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION
		if i%2 == 0 {
			tok = ts.write(t, r)
		} else {
			resp, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{
				Updates: []*v1.RelationshipUpdate{update(v1.RelationshipUpdate_OPERATION_DELETE, r)},
			})
			if err != nil {
				t.Fatal(err)
			}
			tok, want = resp.WrittenAt, v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION
		}
		if _, err := ts.check(t, minimizeLatency(), obj("document", "readme"), "view", sub("user", "amy", "")); err != nil {
			t.Fatal(err) // fills the cache at the window's revision
		}
		atLeast := &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: tok}}
		resp, err := ts.check(t, atLeast, obj("document", "readme"), "view", sub("user", "amy", ""))
		if err != nil || resp.Permissionship != want {
			t.Fatalf("write %d: at_least_as_fresh its token: %v, %v; want %v", i, resp, err, want)
		}
	}
}
