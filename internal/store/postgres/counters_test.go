package postgres_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// TestCountersSurviveReopen registers counters, closes the store and opens the
// database again: the registrations are there, the removed one is not.
func TestCountersSurviveReopen(t *testing.T) {
	ctx := context.Background()
	s, uri := open(t, postgres.Options{})
	docs := store.Filter{ResourceType: "document", ResourceIDs: []string{"a", "b"}, Subject: &store.SubjectFilter{Type: "user", RelationSet: true}}
	if err := s.RegisterCounter(ctx, "docs", docs); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterCounter(ctx, "gone", store.Filter{}); err != nil {
		t.Fatal(err)
	}
	if err := s.UnregisterCounter(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := postgres.Open(ctx, uri, postgres.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.CounterFilter(ctx, "docs"); err != nil || !reflect.DeepEqual(got, docs) {
		t.Errorf("counter after reopen: %+v, %v; want %+v", got, err, docs)
	}
	if _, err := s.CounterFilter(ctx, "gone"); !errors.Is(err, store.ErrCounterUnknown) {
		t.Errorf("unregistered counter after reopen: %v; want %v", err, store.ErrCounterUnknown)
	}
}

// TestTenantSchemasAreMigratedOnOpen opens a Permify tenant whose schema was made by
// a latch before relationship counters: the tenant's schema is brought to the current
// version, and its store keeps counters.
func TestTenantSchemasAreMigratedOnOpen(t *testing.T) {
	ctx := context.Background()
	tenants := sqlstore.Tenants{
		URI: newDatabase(t), Engine: "postgres", Migrate: postgres.Migrate,
		Open: func(ctx context.Context, uri string) (store.Store, error) {
			return postgres.Open(ctx, uri, postgres.Options{GCInterval: -1})
		},
	}
	st, err := tenants.Create(ctx, sqlstore.Tenant{ID: "acme", Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	conn, err := pgx.Connect(ctx, tenants.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var schema string
	if err := conn.QueryRow(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'latch\_tenant\_%'`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	// Take the tenant's schema back to version 2, before counters.
	in := pgx.Identifier{schema}.Sanitize() + "."
	for _, sql := range []string{"DROP TABLE " + in + "latch_relationship_counters", "DELETE FROM " + in + "latch_migrations WHERE version > 2"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	list, err := tenants.Existing(ctx)
	if err != nil {
		t.Fatalf("opening a tenant made before counters: %v", err)
	}
	defer func() {
		for _, tn := range list {
			_ = tn.Store.Close()
		}
	}()
	if len(list) != 1 || list[0].ID != "acme" {
		t.Fatalf("tenants: %+v; want acme", list)
	}
	if err := list[0].Store.RegisterCounter(ctx, "docs", store.Filter{ResourceType: "document"}); err != nil {
		t.Fatalf("registering a counter in the migrated tenant: %v", err)
	}
}
