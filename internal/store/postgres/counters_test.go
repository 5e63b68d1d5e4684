package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/sqlstore"
	"github.com/latch-authz/latch/internal/store/storetest"
)

// TestCountersSurviveReopen registers counters, closes the store and opens the
// database again: the registrations are there, the removed one is not.
func TestCountersSurviveReopen(t *testing.T) {
	s, uri := open(t, postgres.Options{})
	storetest.CountersSurviveReopen(t, s, func() store.Store {
		s, err := postgres.Open(context.Background(), uri, postgres.Options{GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, map[string]store.Filter{
		"docs": {ResourceType: "document", ResourceIDs: []string{"a", "b"}, Subject: &store.SubjectFilter{Type: "user", RelationSet: true}},
	})
}

// TestTenantSchemasAreMigratedOnOpen opens a Permify tenant whose schema was made by
// a latch before relationship counters: the tenant's schema is brought to the current
// version, and its store keeps counters.
func TestTenantSchemasAreMigratedOnOpen(t *testing.T) {
	ctx := context.Background()
	base, uri := open(t, postgres.Options{})
	tenants := sqlstore.Tenants{
		URI: uri, Engine: "postgres", Migrate: postgres.Migrate,
		Open: func(ctx context.Context, schema string) (store.Store, error) {
			return base.InSchema(ctx, schema, postgres.Options{GCInterval: -1})
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
