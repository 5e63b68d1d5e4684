package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// TestReadReplica reads through a streaming replica: reads at revisions the replica
// has replayed are served by it, reads at newer revisions by the primary, and both
// give the exact state of the revision.
func TestReadReplica(t *testing.T) {
	pgtest.Get(t)
	primary, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Close() })
	replica, err := primary.StartReplica()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Close() })
	uri := primary.NewDatabase(t, "latch_migrated", postgres.Migrate)
	replicaURI := strings.Replace(uri, fmt.Sprintf(":%d/", primary.Port()), fmt.Sprintf(":%d/", replica.Port()), 1)
	dbName := uri[strings.LastIndex(uri, "/")+1 : strings.Index(uri, "?")]
	ctx := context.Background()
	s, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1, ReplicaURIs: []string{replicaURI}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	write := func(id string) store.Revision {
		rev, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: docRel(id, "u")}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	// expect reads rev and reports whether the replica served the read.
	expect := func(rev store.Revision, want ...string) bool {
		t.Helper()
		before := postgres.ReplicaPagesForTest(s)
		got, err := readAll(ctx, s, rev)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("at %d read %q, %v; want %q", rev, got, err, want)
		}
		return postgres.ReplicaPagesForTest(s) > before
	}
	r1 := write("a")
	deadline := time.Now().Add(10 * time.Second)
	for !expect(r1, "a") {
		if time.Now().After(deadline) {
			t.Fatal("the replica never served a read at a revision the primary committed 10s ago")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := replica.Exec(ctx, dbName, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	r2 := write("b")
	time.Sleep(20 * time.Millisecond) // past replicaRecheck: the replica is asked again
	if expect(r2, "a", "b") {
		t.Fatalf("the paused replica served a read at %d, which it has not replayed", r2)
	}
	if !expect(r1, "a") {
		t.Fatalf("the replica did not serve a read at %d, which it has replayed", r1)
	}
	if err := replica.Exec(ctx, dbName, "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	for !expect(r2, "a", "b") {
		if time.Now().After(deadline) {
			t.Fatal("the resumed replica never served a read at the newest revision")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A replica that goes away costs nothing but a fallback to the primary.
	if err := replica.StopServer(); err != nil {
		t.Fatal(err)
	}
	if expect(r2, "a", "b") {
		t.Fatal("a stopped replica served a read")
	}
}
