package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// holdSlots takes every slot of l for the rest of the test.
func holdSlots(t *testing.T, l *limiter) {
	t.Helper()
	for range cap(l.slots) {
		if err := l.acquire(context.Background()); err != nil {
			t.Fatalf("taking a %s slot: %v", l.class, err)
		}
		t.Cleanup(l.release)
	}
}

// TestPermifyShedsWithItsCode: the Permify API goes through the same limiters as gRPC;
// with every cheap slot taken and the queue's wait over, a Permify check is refused
// the way Permify's own limiter refuses one: HTTP 429, code 8 (RESOURCE_EXHAUSTED),
// a sentence, and a Retry-After header. A lookup takes the expensive class, which
// still has room.
func TestPermifyShedsWithItsCode(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.MaxInflightCheap, c.MaxQueuedCheap, c.AdmissionWait = 1, 1, time.Millisecond
	})
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/schemas/write", map[string]any{"schema": "entity user {}\nentity doc { relation owner @user permission view = owner }"}); code != http.StatusOK {
		t.Fatalf("schemas/write: %d %v", code, out)
	}
	holdSlots(t, ts.srv.adm.cheap)
	check := map[string]any{"entity": map[string]any{"type": "doc", "id": "1"}, "permission": "view", "subject": map[string]any{"type": "user", "id": "a"}}
	code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/permissions/check", check)
	if code != http.StatusTooManyRequests || out["code"] != float64(8) || !strings.Contains(out["message"].(string), "server overloaded") {
		t.Fatalf("a Permify check with every cheap slot taken: %d %v, want 429, code 8 and the reason", code, out)
	}
	lookup := map[string]any{"entity_type": "doc", "permission": "view", "subject": map[string]any{"type": "user", "id": "a"}}
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/permissions/lookup-entity", lookup); code != http.StatusOK {
		t.Fatalf("a Permify lookup (expensive class) while the cheap class is full: %d %v", code, out)
	}
}

// TestPlaygroundYieldsToTheAPI: a playground evaluation is refused with 503 and its
// reason while an API call waits for a slot, and runs once none does.
func TestPlaygroundYieldsToTheAPI(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxInflightCheap, c.MaxQueuedCheap, c.AdmissionWait = 1, 1, time.Minute })
	const body = `{"session":"0123456789abcdef","schema":"definition user {}"}`
	cheap := ts.srv.adm.cheap
	if err := cheap.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cheap.acquire(context.Background()) }()
	for cheap.queued.Load() == 0 { // the waiter is in the queue
		time.Sleep(time.Millisecond)
	}
	code, out := ts.post(t, "/playground/api/analyze", "", body)
	if code != http.StatusServiceUnavailable || !strings.Contains(out["error"].(string), "cheap requests are waiting") {
		t.Errorf("playground while an API call waits: %d %v, want 503 naming the waiting calls", code, out)
	}
	cheap.release()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	cheap.release()
	if code, out := ts.post(t, "/playground/api/analyze", "", body); code != http.StatusOK {
		t.Errorf("playground once the API is idle: %d %v", code, out)
	}
}

// TestPlaygroundTimeLimitAnswers503: an evaluation that runs out of time answers 503
// with the reason, not a 500.
func TestPlaygroundTimeLimitAnswers503(t *testing.T) {
	ts := start(t, func(c *Config) { c.PlaygroundTimeout = time.Nanosecond })
	code, out := ts.post(t, "/playground/api/check", "", `{"session":"0123456789abcdef","schema":"definition user {}\ndefinition doc { relation viewer: user }","checks":"doc:1#viewer@user:a"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(out["error"].(string), "took longer than the playground's limit") {
		t.Fatalf("an evaluation past its time limit: %d %v, want 503 with the reason", code, out)
	}
}

// TestPlaygroundKeyAndDefault: with a key the playground's API wants it; without
// --playground-enabled the playground is served on a loopback HTTP address only.
func TestPlaygroundKeyAndDefault(t *testing.T) {
	ts := start(t, func(c *Config) { c.PlaygroundPresharedKey = "pg-key" })
	const body = `{"session":"0123456789abcdef","schema":"definition user {}"}`
	if code, out := ts.post(t, "/playground/api/analyze", "", body); code != http.StatusUnauthorized {
		t.Errorf("playground without its key: %d %v, want 401", code, out)
	}
	if code, out := ts.post(t, "/playground/api/analyze", "pg-key", body); code != http.StatusOK {
		t.Errorf("playground with its key: %d %v", code, out)
	}
	on, off := true, false
	for _, c := range []struct {
		addr    string
		enabled *bool
		want    bool
	}{
		{"127.0.0.1:8443", nil, true},
		{"localhost:8443", nil, true},
		{"0.0.0.0:8443", nil, false},
		{":8443", nil, false},
		{"0.0.0.0:8443", &on, true},
		{"127.0.0.1:8443", &off, false},
	} {
		if got := (Config{HTTPAddr: c.addr, PlaygroundEnabled: c.enabled}).playgroundEnabled(); got != c.want {
			t.Errorf("playground on %q (flag %v): %v, want %v", c.addr, c.enabled, got, c.want)
		}
	}
	off2 := start(t, func(c *Config) { c.PlaygroundEnabled = &off })
	if code, _ := off2.postRaw(t, "/playground/api/analyze", "", body); code != http.StatusNotFound {
		t.Errorf("playground turned off: %d, want 404", code)
	}
}

// ownedDocs writes n documents that user zed owns (doc-00000 ...) and returns a
// connection whose flow-control windows stay small while nothing is read, so that the
// server's sends of a stream its client does not read block soon.
func ownedDocs(t *testing.T, ts *testServer, n int) *grpc.ClientConn {
	t.Helper()
	ts.writeSchema(t, docSchema)
	var rels []*v1.Relationship
	for i := range n {
		rels = append(rels, relationship("document", fmt.Sprintf("doc-%05d", i), "owner", "user", "zed", ""))
	}
	if _, err := ts.importRels(t, rels); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(ts.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(testKey)),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestStalledStreamFreesItsSlot: a LookupResources stream whose client never reads
// (its flow-control window kept small, so the server's sends block) is ended and its
// expensive slot freed; other clients' lookups and reads are admitted again, and the
// stalled client, when it reads at last, gets the reason.
func TestStalledStreamFreesItsSlot(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.MaxInflightExpensive, c.MaxQueuedExpensive, c.AdmissionWait = 1, 1, time.Millisecond
		c.StreamStallTimeout = 100 * time.Millisecond
	})
	conn := ownedDocs(t, ts, 5000)
	stalled, err := v1.NewPermissionsServiceClient(conn).LookupResources(ctxT(t), &v1.LookupResourcesRequest{
		Consistency: fullyConsistent(), ResourceObjectType: "document", Permission: "view", Subject: sub("user", "zed", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stalled.Header(); err != nil { // the call is running and holds the slot
		t.Fatal(err)
	}
	expensive := ts.srv.adm.expensive
	for len(expensive.slots) > 0 { // until the stall timeout frees it
		if ctxT(t).Err() != nil {
			t.Fatal("the stalled stream still holds its slot")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := ts.readAll(t, &v1.ReadRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "doc-00001"}}); err != nil {
		t.Fatalf("another client's read after the stalled stream was ended: %v", err)
	}
	n := 0
	for {
		_, err := stalled.Recv()
		if err == nil {
			n++
			continue
		}
		if errors.Is(err, io.EOF) || status.Code(err) == codes.OK {
			t.Fatalf("the stalled stream ended cleanly after %d of 5000 results", n)
		}
		t.Logf("the stalled stream, read at last: %d results, then %v", n, err)
		break
	}
}

// TestTenantCreateDuringOutage: with PostgreSQL down, tenants/create answers 503 "the
// datastore is unavailable" like every other call, and nothing of the database's
// address, user or name reaches the client.
func TestTenantCreateDuringOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a PostgreSQL server")
	}
	pg := pgtest.Own(t) // a server of its own: this test stops it
	uri := pg.URI("postgres")
	if err := postgres.Migrate(context.Background(), uri); err != nil {
		t.Fatal(err)
	}
	ts := start(t, func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "postgres", uri })
	if err := pg.StopServer(); err != nil {
		t.Fatal(err)
	}
	code, raw := ts.postRaw(t, "/v1/tenants/create", testKey, `{"id":"during-outage"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(raw), "the datastore is unavailable") {
		t.Errorf("tenants/create during an outage: %d %s, want 503 saying the datastore is unavailable", code, raw)
	}
	for _, secret := range []string{strconv.Itoa(pg.Port()), "127.0.0.1", "localhost", "user=", "postgres://", "dbname"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("tenants/create during an outage leaks %q: %s", secret, raw)
		}
	}
}
