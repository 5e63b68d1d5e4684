package crdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// migration is one released step of the schema; its statements run one by one
// (CockroachDB does not run schema changes reliably inside explicit transactions), so
// each must be idempotent.
type migration struct {
	version    int
	name       string
	statements []string
}

var migrations = []migration{{
	version: 1,
	name:    "relationships and schema",
	statements: []string{
		// STRING compares bytewise, matching store.CompareKeys.
		`CREATE TABLE IF NOT EXISTS latch_relationships (
			resource_type STRING NOT NULL,
			resource_id STRING NOT NULL,
			relation STRING NOT NULL,
			subject_type STRING NOT NULL,
			subject_id STRING NOT NULL,
			subject_relation STRING NOT NULL,
			caveat_name STRING,
			caveat_context JSONB,
			expiration TIMESTAMPTZ,
			CONSTRAINT latch_relationships_pk PRIMARY KEY
				(resource_type, resource_id, relation, subject_type, subject_id, subject_relation),
			INDEX latch_relationships_by_subject (subject_id, subject_type, resource_type, relation, subject_relation)
		)`,
		`CREATE TABLE IF NOT EXISTS latch_schema (
			singleton BOOL PRIMARY KEY DEFAULT true CHECK (singleton),
			text STRING NOT NULL
		)`,
		// History must outlive the GC window (24h by default) for AS OF SYSTEM TIME reads.
		`ALTER TABLE latch_relationships CONFIGURE ZONE USING gc.ttlseconds = 90000`,
		`ALTER TABLE latch_schema CONFIGURE ZONE USING gc.ttlseconds = 90000`,
	},
}, {
	version: 2,
	name:    "relationship counters",
	// A plain table (sqlstore.Counters): registrations are not read AS OF SYSTEM
	// TIME, so the table keeps the default GC TTL.
	statements: []string{
		`CREATE TABLE IF NOT EXISTS latch_relationship_counters (
			name STRING PRIMARY KEY,
			filter STRING NOT NULL
		)`,
	},
}}

// schemaVersions keeps the database's schema version in latch_migrations.
var schemaVersions = sqlstore.Migrations{
	Engine:      "cockroachdb",
	Latest:      migrations[len(migrations)-1].version,
	NotMigrated: ErrNotMigrated,
	CreateTable: `CREATE TABLE IF NOT EXISTS latch_migrations (
		version INT PRIMARY KEY, name STRING NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
	Apply: apply,
}

// Migrate brings the database at uri to the latest schema version. It is idempotent.
func Migrate(ctx context.Context, uri string) error { return schemaVersions.Migrate(ctx, uri) }

func apply(ctx context.Context, conn *pgx.Conn, current int) error {
	for _, m := range migrations[current:] {
		for _, stmt := range m.statements {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				return sqlstore.Classify(ctx, fmt.Sprintf("cockroachdb: migration %d (%s)", m.version, m.name), err)
			}
		}
		if _, err := conn.Exec(ctx, "UPSERT INTO latch_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return sqlstore.Classify(ctx, "cockroachdb: recording a migration", err)
		}
	}
	return nil
}
