package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// TestReadReplica reads through a streaming replica: reads at revisions the replica
// has replayed are served by it, reads at newer revisions by the primary, and both
// give the exact state of the revision; PrimaryReader never reads from the replica,
// and ReadStats counts every page where it was read.
func TestReadReplica(t *testing.T) {
	primary, replica := pgtest.StartWithReplica(t)
	uri := primary.NewDatabase(t, "latch_migrated", postgres.Migrate)
	dbName := pgtest.Database(uri)
	ctx := context.Background()
	s, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1, ReplicaURIs: []string{replica.URI(dbName)}})
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
	// expectWith reads rev through a reader from open and reports whether the replica
	// served the read.
	expectWith := func(open func(context.Context, store.Revision) (store.Reader, error), rev store.Revision, want ...string) bool {
		t.Helper()
		before := s.ReadStats()
		r, err := open(ctx, rev)
		if err != nil {
			t.Fatalf("opening a reader at %d: %v", rev, err)
		}
		got, err := readAllReader(ctx, r)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("at %d read %q, %v; want %q", rev, got, err, want)
		}
		after := s.ReadStats()
		if after.Primary+after.Replica == before.Primary+before.Replica {
			t.Fatalf("the read at %d was not counted in ReadStats (%+v)", rev, after)
		}
		return after.Replica > before.Replica
	}
	expect := func(rev store.Revision, want ...string) bool {
		t.Helper()
		return expectWith(s.Reader, rev, want...)
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
	if expectWith(s.PrimaryReader, r2, "a", "b") {
		t.Fatalf("PrimaryReader read at %d from the replica", r2)
	}
	// A replica that goes away costs nothing but a fallback to the primary.
	if err := replica.StopServer(); err != nil {
		t.Fatal(err)
	}
	if expect(r2, "a", "b") {
		t.Fatal("a stopped replica served a read")
	}
}
