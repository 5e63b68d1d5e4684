package server

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// TestHealthFollowsTheDatastore stops and restarts a PostgreSQL server of its own under
// latch: gRPC health and the gateway's /healthz report NOT_SERVING (HTTP 503) while the
// datastore is unreachable, and SERVING again once it is back.
func TestHealthFollowsTheDatastore(t *testing.T) {
	pgtest.Get(t) // skips without PostgreSQL
	pg, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() }) // after the database's own cleanup
	uri := pg.NewDatabase(t, "latch_migrated", postgres.Migrate)
	ts := start(t, func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "postgres", uri })
	health := healthpb.NewHealthClient(ts.conn)
	waitHealth := func(want healthpb.HealthCheckResponse_ServingStatus, wantHTTP int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := health.Check(ctxT(t), &healthpb.HealthCheckRequest{})
			got := healthpb.HealthCheckResponse_UNKNOWN
			if err == nil {
				got = resp.Status
			}
			code := healthzStatus(t, ts.httpAddr)
			if got == want && code == wantHTTP {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health %v, /healthz %d; want %v and %d", got, code, want, wantHTTP)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitHealth(healthpb.HealthCheckResponse_SERVING, http.StatusOK)
	if err := pg.StopServer(); err != nil {
		t.Fatal(err)
	}
	waitHealth(healthpb.HealthCheckResponse_NOT_SERVING, http.StatusServiceUnavailable)
	if err := pg.StartServer(); err != nil {
		t.Fatal(err)
	}
	waitHealth(healthpb.HealthCheckResponse_SERVING, http.StatusOK)
}

func healthzStatus(t *testing.T, httpAddr string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/healthz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
