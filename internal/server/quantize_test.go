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
	ts := start(t, func(c *Config) { c.QuantizationWindow, c.MaxStalenessPercent = time.Hour, 0 })
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
		RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "readme"}})
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
