package sqlstore

import (
	"testing"

	"github.com/latch-authz/latch/internal/store"
)

func TestTablesSQL(t *testing.T) {
	in := InSchema("latch_tenant_ab")
	for _, c := range []struct{ stmt, want string }{
		{"SELECT rev FROM latch_revision", `SELECT rev FROM "latch_tenant_ab".latch_revision`},
		{
			"SELECT r.rev FROM latch_revision r LEFT JOIN latch_transactions t ON t.rev = $1",
			`SELECT r.rev FROM "latch_tenant_ab".latch_revision r LEFT JOIN "latch_tenant_ab".latch_transactions t ON t.rev = $1`,
		},
		// Constraints, indexes and names that only start with a table's name stay.
		{
			"INSERT INTO latch_relationships VALUES ($1) ON CONFLICT ON CONSTRAINT latch_relationships_pk DO NOTHING",
			`INSERT INTO "latch_tenant_ab".latch_relationships VALUES ($1) ON CONFLICT ON CONSTRAINT latch_relationships_pk DO NOTHING`,
		},
		{"SELECT 1 FROM latch_relationship_counters", `SELECT 1 FROM "latch_tenant_ab".latch_relationship_counters`},
		// Already qualified or quoted names, and a name inside another, stay.
		{`SELECT 1 FROM public.latch_schema, "latch_schema", my_latch_schema`, `SELECT 1 FROM public.latch_schema, "latch_schema", my_latch_schema`},
		{"latch_migrations", `"latch_tenant_ab".latch_migrations`},
		{"SELECT 1", "SELECT 1"},
	} {
		if got := in.SQL(c.stmt); got != c.want {
			t.Errorf("SQL(%q)\n got %q\nwant %q", c.stmt, got, c.want)
		}
		if got := (Tables{}).SQL(c.stmt); got != c.stmt {
			t.Errorf("unqualified SQL(%q) = %q", c.stmt, got)
		}
	}
	if got := in.ident("latch_relationships"); len(got) != 2 || got[0] != "latch_tenant_ab" {
		t.Errorf("ident: %v", got)
	}
}

// BenchmarkTablesSQL is what naming a schema adds to a tenant's read: the rewrite of
// a page query, in place of a connection's search_path.
func BenchmarkTablesSQL(b *testing.B) {
	in := InSchema("latch_tenant_0123456789abcdef0123")
	var a Args
	stmt := Select{Table: "latch_relationships", Filter: store.Filter{ResourceType: "doc", Relation: "viewer"}, Limit: 100}.Build(&a, nil)
	b.ReportAllocs()
	for b.Loop() {
		_ = in.SQL(stmt)
	}
}
