package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

const notMigrated = `database is not migrated: run "latch datastore migrate --datastore-engine postgres --datastore-conn-uri ..."`

func TestOpenRefusesUnmigratedDatabase(t *testing.T) {
	srv := pgtest.Get(t)
	ctx := context.Background()
	uri := srv.NewDatabase(t, "", nil)
	_, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1})
	if !errors.Is(err, postgres.ErrNotMigrated) || !strings.HasPrefix(err.Error(), notMigrated) {
		t.Fatalf("opening an empty database: %v; want %q", err, notMigrated)
	}
	for range 2 { // migrating twice is a no-op the second time
		if err := postgres.Migrate(ctx, uri); err != nil {
			t.Fatal(err)
		}
	}
	s, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1})
	if err != nil {
		t.Fatalf("opening a migrated database: %v", err)
	}
	rev, err := s.HeadRevision(ctx)
	s.Close()
	if err != nil || rev != 1 {
		t.Fatalf("head of a new database: %d, %v; want 1", rev, err)
	}

	// A database at an older version is refused the same way.
	dbName := uri[strings.LastIndex(uri, "/")+1 : strings.Index(uri, "?")]
	if err := srv.Exec(ctx, dbName, "UPDATE latch_migrations SET version = version - 1000"); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1}); !errors.Is(err, postgres.ErrNotMigrated) {
		t.Fatalf("opening an older database: %v; want ErrNotMigrated", err)
	}
	// A newer one asks for a newer latch.
	if err := srv.Exec(ctx, dbName, "UPDATE latch_migrations SET version = version + 2000"); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(ctx, uri, postgres.Options{GCInterval: -1})
	if err == nil || !strings.Contains(err.Error(), "newer than this latch") {
		t.Fatalf("opening a newer database: %v; want a request to upgrade latch", err)
	}
	if err := postgres.Migrate(ctx, uri); err == nil || !strings.Contains(err.Error(), "newer than this latch") {
		t.Fatalf("migrating a newer database: %v; want a request to upgrade latch", err)
	}
}

func TestBadConnectionURI(t *testing.T) {
	ctx := context.Background()
	_, err := postgres.Open(ctx, "postgres://user:secret@host:notaport/db", postgres.Options{})
	if err == nil || !strings.Contains(err.Error(), "connection URI is not valid") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("open with a malformed URI: %v; want a clear error without the password", err)
	}
	if err := postgres.Migrate(ctx, "::::"); err == nil || !strings.Contains(err.Error(), "connection URI is not valid") {
		t.Fatalf("migrate with a malformed URI: %v", err)
	}
	// Nothing listens on port 1: the store is unavailable, and says so promptly.
	start := time.Now()
	_, err = postgres.Open(ctx, "postgres://latch@127.0.0.1:1/db?sslmode=disable", postgres.Options{})
	if !errors.Is(err, store.ErrUnavailable) || time.Since(start) > 5*time.Second {
		t.Fatalf("open with nothing listening: %v after %v; want ErrUnavailable at once", err, time.Since(start))
	}
}

func TestMissingDatabaseIsNotUnavailable(t *testing.T) {
	srv := pgtest.Get(t)
	_, err := postgres.Open(context.Background(), srv.URI("no_such_database"), postgres.Options{})
	if err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "no_such_database") {
		t.Fatalf("open of a missing database: %v; want an error naming it, not ErrUnavailable", err)
	}
}

func TestGC(t *testing.T) {
	s, uri := open(t, postgres.Options{GCWindow: 50 * time.Millisecond, GCBatch: 7})
	ctx := context.Background()
	var us []store.Update
	for i := range 30 {
		us = append(us, store.Update{Op: store.Create, Relationship: docRel(fmt.Sprint("d", i), "u")})
	}
	r1, err := s.Write(ctx, nil, us, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range us {
		us[i].Op = store.Delete
	}
	r2, err := s.Write(ctx, nil, us[:20], nil) // ends 20 rows
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteSchema(ctx, "definition doc {}", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	r4, err := s.Write(ctx, nil, us[20:25], nil) // newer than the window: kept
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Horizon != r4-1 || res.Relationships != 20 {
		t.Fatalf("GC %+v; want horizon %d and the 20 rows ended at %d", res, r4-1, r2)
	}
	for _, rev := range []store.Revision{r1, r2} {
		if _, err := s.Reader(ctx, rev); !errors.Is(err, store.ErrRevisionGone) {
			t.Fatalf("reader at collected revision %d: %v, want ErrRevisionGone", rev, err)
		}
	}
	// Another process (no cache) agrees that the revision is gone.
	other, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Reader(ctx, r2); !errors.Is(err, store.ErrRevisionGone) {
		t.Fatalf("reader at collected revision %d in another store: %v, want ErrRevisionGone", r2, err)
	}
	for rev, want := range map[store.Revision]int{r4 - 1: 10, r4: 5} {
		got, err := readAll(ctx, s, rev)
		if err != nil || len(got) != want {
			t.Fatalf("at %d after GC: %d relationships, %v; want %d", rev, len(got), err, want)
		}
	}
	r, _ := s.Reader(ctx, r4)
	if text, err := r.Schema(ctx); err != nil || text != "definition doc {}" {
		t.Fatalf("schema after GC: %q, %v", text, err)
	}
}

func TestBackgroundGCStopsOnClose(t *testing.T) {
	uri := newDatabase(t)
	s, err := postgres.Open(context.Background(), uri, postgres.Options{GCWindow: time.Millisecond, GCInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r1, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: docRel("a", "u")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.Reader(ctx, r1)
		if errors.Is(err, store.ErrRevisionGone) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background collector did not collect revision %d: %v", r1, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the collector")
	}
}

// relSeq yields n distinct relationships on resources prefix0, prefix1, ..., and an
// error instead of the one at failAt.
func relSeq(prefix string, n int, failAt int) iter.Seq2[rel.Relationship, error] {
	return func(yield func(rel.Relationship, error) bool) {
		for i := range n {
			if i == failAt {
				yield(rel.Relationship{}, errors.New("source failed"))
				return
			}
			r := docRel(fmt.Sprint(prefix, i), fmt.Sprint("u", i%100))
			if i%10 == 0 {
				r.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"i": float64(i)}}
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}

func TestBulkLoad(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx := context.Background()
	rev, err := s.BulkLoad(ctx, relSeq("d", 5000, -1))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(ctx, s, rev)
	if err != nil || len(got) != 5000 {
		t.Fatalf("after bulk load read %d, %v; want 5000", len(got), err)
	}
	r, _ := s.Reader(ctx, rev)
	for item, err := range r.Query(ctx, store.Filter{ResourceIDs: []string{"d10"}}, store.QueryOptions{}) {
		if err != nil || item.Relationship.Caveat == nil || item.Relationship.Caveat.Context["i"] != 10.0 {
			t.Fatalf("bulk loaded caveat: %+v, %v", item.Relationship.Caveat, err)
		}
	}
	// An existing relationship fails the whole load.
	_, err = s.BulkLoad(ctx, func(yield func(rel.Relationship, error) bool) {
		_ = yield(docRel("new", "u"), nil) && yield(docRel("d42", "u42"), nil)
	})
	var exists *store.AlreadyExistsError
	if !errors.As(err, &exists) || exists.Relationship.Key() != docRel("d42", "u42").Key() {
		t.Fatalf("bulk load of an existing relationship: %v; want AlreadyExistsError naming it", err)
	}
	// So do a failing source and a duplicate within the load.
	if _, err := s.BulkLoad(ctx, relSeq("e", 20000, 15000)); err == nil || !strings.Contains(err.Error(), "source failed") {
		t.Fatalf("bulk load from a failing source: %v", err)
	}
	dup := func(yield func(rel.Relationship, error) bool) {
		for range 2 {
			if !yield(docRel("x", "u"), nil) {
				return
			}
		}
	}
	if _, err := s.BulkLoad(ctx, dup); !errors.As(err, &exists) {
		t.Fatalf("bulk load with a duplicate: %v; want AlreadyExistsError", err)
	}
	head, _ := s.HeadRevision(ctx)
	if got, _ := readAll(ctx, s, head); head != rev || len(got) != 5000 {
		t.Fatalf("failed bulk loads changed the store: head %d (want %d), %d relationships", head, rev, len(got))
	}
}
