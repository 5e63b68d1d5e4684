package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/latch-authz/latch/internal/bench"
	"github.com/latch-authz/latch/internal/server"
)

const permifyWorkload = `name: permify-http
users: 10
generators:
  id: {dist: uniform}
steps:
  - name: check-doc
    type: check
    weight: 1
    resource: document:d{id}
    permission: view
    subject: user:u{id}
phases:
  - name: steady
    duration: 1s
    closed: {in_flight: 4}
`

// TestBenchRunAgainstPermifyAPI drives a latch server's Permify HTTP API.
func TestBenchRunAgainstPermifyAPI(t *testing.T) {
	srv, err := server.New(server.Config{
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", PresharedKeys: []string{"k"},
		DatastoreEngine: "memory", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	grpcAddr, httpAddr := srv.Addrs()
	runSteps(t, map[string]string{"LATCH_ENDPOINT": grpcAddr, "LATCH_TOKEN": "k"}, []step{
		{args: []string{"schema", "write", "-"}, stdin: "definition user {}\ndefinition document {\n\trelation viewer: user\n\tpermission view = viewer\n}", outRE: token},
		{args: []string{"relationship", "create", "document:d1#viewer@user:u1"}, outRE: token},
	})
	dir := t.TempDir()
	wl, out := filepath.Join(dir, "w.yaml"), filepath.Join(dir, "r.json")
	if err := os.WriteFile(wl, []byte(permifyWorkload), 0o600); err != nil {
		t.Fatal(err)
	}
	r := invocation{env: map[string]string{"LATCH_TOKEN": "k"}}.run(context.Background(),
		"bench", "run", wl, "--permify-url", "http://"+httpAddr, "-q", "-o", out)
	if r.code != 0 {
		t.Fatalf("bench run: status %d, stderr %s", r.code, r.err)
	}
	res, err := bench.ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Phases[0].Steps[0]
	if st.Count == 0 || len(st.Errors) != 0 {
		t.Errorf("check-doc: %d requests, errors %v", st.Count, st.Errors)
	}
	r = invocation{}.run(context.Background(), "bench", "run", wl, "--permify-url", "http://"+httpAddr, "--in-process")
	if r.code != 1 {
		t.Errorf("--permify-url with --in-process: status %d", r.code)
	}
}
