package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
	"github.com/latch-authz/latch/internal/store/sqlstore"
	"github.com/latch-authz/latch/internal/store/storetest"
)

// sharedBase opens a store on a fresh database, migrates n schemas s0..s(n-1) in it,
// and then drops the store's own tables, so that a statement of a store in a schema
// that did not name its tables fails instead of reading the base's rows.
func sharedBase(t *testing.T, n int, opts postgres.Options) (*postgres.Store, string) {
	t.Helper()
	ctx := context.Background()
	s, uri := open(t, opts)
	db := pgtest.Database(uri)
	for i := range n {
		schema := fmt.Sprintf("s%d", i)
		if err := pgtest.Get(t).Exec(ctx, db, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		in, err := sqlstore.TenantURI(uri, schema)
		if err == nil {
			err = postgres.Migrate(ctx, in)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	err := pgtest.Get(t).Exec(ctx, db, `DROP TABLE latch_relationships, latch_transactions, latch_revision,
		latch_schema, latch_relationship_counters, latch_migrations`)
	if err != nil {
		t.Fatal(err)
	}
	return s, uri
}

func inSchema(t *testing.T, base *postgres.Store, schema string) *postgres.Store {
	t.Helper()
	s, err := base.InSchema(context.Background(), schema, postgres.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A store in a schema passes the whole suite on pools it shares with a store whose
// tables are gone: every statement it sends names its schema's tables.
func TestInSchemaConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		base, _ := sharedBase(t, 1, postgres.Options{})
		return inSchema(t, base, "s0")
	})
}

// Fifty stores in schemas of one database, written and read concurrently, open no
// connection beyond the shared pools', and each sees only its own relationships.
func TestInSchemaSharesPools(t *testing.T) {
	const tenants, conns = 50, 2
	ctx := context.Background()
	base, uri := sharedBase(t, tenants, postgres.Options{ReadConns: conns, WriteConns: conns})
	stores := make([]*postgres.Store, tenants)
	for i := range stores {
		stores[i] = inSchema(t, base, fmt.Sprintf("s%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*tenants)
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- writeAndReadOwn(ctx, s, i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := sessions(t, uri); n > 2*conns {
		t.Errorf("%d sessions on the database with %d stores, want at most %d (the base's pools)", n, tenants+1, 2*conns)
	}
}

// writeAndReadOwn writes doc:<i>#viewer@user:<i> twice over in s and checks that a
// read of every doc finds exactly that relationship.
func writeAndReadOwn(ctx context.Context, s *postgres.Store, i int) error {
	r, err := rel.Parse(fmt.Sprintf("doc:%d#viewer@user:%d", i, i))
	if err != nil {
		return err
	}
	for range 2 {
		if _, err := s.Write(ctx, nil, []store.Update{{Op: store.Touch, Relationship: r}}, nil); err != nil {
			return fmt.Errorf("store %d: %w", i, err)
		}
		rev, err := s.HeadRevision(ctx)
		if err != nil {
			return fmt.Errorf("store %d: %w", i, err)
		}
		rd, err := s.Reader(ctx, rev)
		if err != nil {
			return fmt.Errorf("store %d: %w", i, err)
		}
		var got []string
		for item, err := range rd.Query(ctx, store.Filter{ResourceType: "doc"}, store.QueryOptions{}) {
			if err != nil {
				return fmt.Errorf("store %d: %w", i, err)
			}
			got = append(got, rel.String(item.Relationship))
		}
		if len(got) != 1 || got[0] != rel.String(r) {
			return fmt.Errorf("store %d reads %q, want only %q", i, got, rel.String(r))
		}
	}
	return nil
}

// sessions counts the server's sessions on uri's database, besides this one.
func sessions(t *testing.T, uri string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
