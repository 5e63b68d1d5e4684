package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
)

// inProcess is a server whose services are called directly, without a network, so
// benchmarks and allocation budgets measure latch rather than gRPC.
type inProcess struct {
	srv   *Server
	perms *permissionsService
}

func newInProcess(tb testing.TB, mutate func(*Config)) *inProcess {
	tb.Helper()
	cfg := Config{
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "-", MetricsAddr: "-", DatastoreEngine: "memory",
		PresharedKeys: []string{testKey}, Logger: slog.New(slog.DiscardHandler),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	p := &inProcess{srv: srv, perms: &permissionsService{s: srv}}
	if _, err := (&schemaService{s: srv}).WriteSchema(context.Background(), &v1.WriteSchemaRequest{Schema: docSchema}); err != nil {
		tb.Fatal(err)
	}
	return p
}

func (p *inProcess) write(tb testing.TB, rs ...*v1.Relationship) *v1.ZedToken {
	tb.Helper()
	resp, err := p.perms.WriteRelationships(context.Background(), &v1.WriteRelationshipsRequest{Updates: touch(rs...)})
	if err != nil {
		tb.Fatal(err)
	}
	return resp.GetWrittenAt()
}

// TestCachedCheckAllocations holds a CheckPermission answered from the cache (the
// whole handler: revision, reader, schema, key, lookup, response) to an allocation
// budget.
func TestCachedCheckAllocations(t *testing.T) {
	p := newInProcess(t, nil)
	p.write(t, relationship("document", "readme", "viewer", "user", "amy", ""))
	req := &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(), Resource: obj("document", "readme"),
		Permission: "view", Subject: sub("user", "amy", ""),
	}
	ctx := context.Background()
	var resp *v1.CheckPermissionResponse
	var err error
	check := func() { resp, err = p.perms.CheckPermission(ctx, req) }
	check() // fills the cache
	before := p.srv.cache.Stats().Hits
	allocs := testing.AllocsPerRun(200, check)
	if err != nil || resp.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("check: %v, %v", resp, err)
	}
	if hits := p.srv.cache.Stats().Hits - before; hits < 200 {
		t.Fatalf("%d cache hits in 201 repeated checks", hits)
	}
	const budget = 6
	t.Logf("cached CheckPermission: %v allocations", allocs)
	if allocs > budget {
		t.Errorf("a cached CheckPermission allocates %v times, budget %d", allocs, budget)
	}
}

// BenchmarkCheckPermission compares a check answered from the cache with the same
// check evaluated (cache off), in process:
//
//	go test ./internal/server -run '^$' -bench CheckPermission -benchmem
func BenchmarkCheckPermission(b *testing.B) {
	for _, bc := range []struct {
		name     string
		maxBytes int64
	}{{"cached", 0}, {"uncached", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			p := newInProcess(b, func(c *Config) { c.DispatchCacheMaxBytes = bc.maxBytes })
			// The subject reaches the document through a group, as in real data.
			p.write(b, relationship("group", "eng", "member", "user", "amy", ""),
				relationship("document", "readme", "viewer", "group", "eng", "member"))
			for i := range 100 {
				p.write(b, relationship("document", "readme", "viewer", "user", fmt.Sprint("u", i), ""))
			}
			req := &v1.CheckPermissionRequest{
				Consistency: minimizeLatency(), Resource: obj("document", "readme"),
				Permission: "view", Subject: sub("user", "amy", ""),
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := p.perms.CheckPermission(ctx, req)
				if err != nil || resp.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
					b.Fatalf("check: %v, %v", resp, err)
				}
			}
		})
	}
}
