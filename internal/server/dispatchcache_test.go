package server

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
)

// TestCheckCacheAnswersRepeats: a repeated check at one revision is answered from the
// cache, and a write (a new revision) is never hidden by it.
func TestCheckCacheAnswersRepeats(t *testing.T) {
	ts := start(t, func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	for range 3 {
		resp, err := ts.check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "amy", ""))
		if err != nil || resp.Permissionship.String() != "PERMISSIONSHIP_NO_PERMISSION" {
			t.Fatalf("check: %v, %v", resp, err)
		}
	}
	if body := scrape(t, ts.srv.MetricsAddr()); !strings.Contains(body, "latch_dispatch_cache_hits_total 2") {
		t.Errorf("two repeated checks were not cache hits:\n%s", grepLines(body, "dispatch_cache"))
	}
	ts.write(t, relationship("document", "readme", "viewer", "user", "amy", ""))
	resp, err := ts.check(t, fullyConsistent(), obj("document", "readme"), "view", sub("user", "amy", ""))
	if err != nil || resp.Permissionship.String() != "PERMISSIONSHIP_HAS_PERMISSION" {
		t.Errorf("check after the write: %v, %v", resp, err)
	}
}

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBulkChecksUseTheCache: a bulk check answers cached items from the cache and the
// rest from the engine, in request order, and caches what it evaluated; items that
// fail are never cached.
func TestBulkChecksUseTheCache(t *testing.T) {
	p := newInProcess(t, nil)
	p.write(t, relationship("document", "readme", "viewer", "user", "amy", ""))
	ctx := context.Background()
	item := func(id, perm, subj string) *v1.CheckBulkPermissionsRequestItem {
		return &v1.CheckBulkPermissionsRequestItem{Resource: obj("document", id), Permission: perm, Subject: sub("user", subj, "")}
	}
	// Warm the cache with one of the bulk's items.
	if _, err := p.perms.CheckPermission(ctx, &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(),
		Resource:    obj("document", "readme"), Permission: "view", Subject: sub("user", "amy", ""),
	}); err != nil {
		t.Fatal(err)
	}
	req := &v1.CheckBulkPermissionsRequest{Consistency: fullyConsistent(), Items: []*v1.CheckBulkPermissionsRequestItem{
		item("other", "view", "amy"), item("readme", "view", "amy"), item("readme", "nosuch", "amy"), item("readme", "view", "bob"),
	}}
	want := []string{"PERMISSIONSHIP_NO_PERMISSION", "PERMISSIONSHIP_HAS_PERMISSION", "error", "PERMISSIONSHIP_NO_PERMISSION"}
	for round := range 2 {
		before := p.srv.cache.Stats()
		resp, err := p.perms.CheckBulkPermissions(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i, pair := range resp.Pairs {
			got := "error"
			if it := pair.GetItem(); it != nil {
				got = it.Permissionship.String()
			}
			if got != want[i] {
				t.Errorf("round %d item %d: %s, want %s", round, i, got, want[i])
			}
		}
		hits := p.srv.cache.Stats().Hits - before.Hits
		if wantHits := []uint64{1, 3}[round]; hits != wantHits {
			t.Errorf("round %d: %d cache hits, want %d", round, hits, wantHits)
		}
	}
}
