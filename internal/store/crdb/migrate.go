package crdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
}}

func latestVersion() int { return migrations[len(migrations)-1].version }

// Migrate brings the database at uri to the latest schema version. It is idempotent.
func Migrate(ctx context.Context, uri string) error {
	cfg, err := pgx.ParseConfig(uri)
	if err != nil {
		return fmt.Errorf("cockroachdb connection URI is not valid: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return sqlstore.Classify(ctx, "cockroachdb: connecting to migrate", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS latch_migrations (
		version INT PRIMARY KEY, name STRING NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	if err != nil {
		return sqlstore.Classify(ctx, "cockroachdb: creating latch_migrations", err)
	}
	current, err := currentVersion(ctx, conn)
	if err != nil {
		return err
	}
	if current > latestVersion() {
		return fmt.Errorf("cockroachdb: database schema version %d is newer than this latch supports (%d): upgrade latch", current, latestVersion())
	}
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

func currentVersion(ctx context.Context, q queryRower) (int, error) {
	var v int
	err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM latch_migrations").Scan(&v)
	if sqlstore.SQLState(err) == "42P01" {
		return 0, nil
	}
	if err != nil {
		return 0, sqlstore.Classify(ctx, "cockroachdb: reading the schema version", err)
	}
	return v, nil
}

func checkVersion(ctx context.Context, pool *pgxpool.Pool) error {
	v, err := currentVersion(ctx, pool)
	if err != nil {
		return err
	}
	switch {
	case v < latestVersion():
		return fmt.Errorf("%w (the database is at schema version %d; this latch needs %d)", ErrNotMigrated, v, latestVersion())
	case v > latestVersion():
		return fmt.Errorf("cockroachdb: database schema version %d is newer than this latch supports (%d): upgrade latch", v, latestVersion())
	}
	return nil
}
