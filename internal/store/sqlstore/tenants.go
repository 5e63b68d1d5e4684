package sqlstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/store"
)

// Tenants keeps Permify tenants in the server's own SQL database, each in a schema
// (namespace) of its own, so every table, index, revision counter and collection is
// the tenant's alone, isolation needs no tenant predicate in any query, and deleting a
// tenant is one DROP SCHEMA. A tenant's store is the backend's ordinary store over
// that schema's tables: its statements name them (Tables), or its connections'
// search_path is the schema. The schema's comment records the tenant's
// id, name and creation time, and is written last: a schema without it is a tenant
// whose creation did not finish.
type Tenants struct {
	// URI is the server's database.
	URI string
	// Engine names the backend in messages ("postgres", "cockroachdb").
	Engine string
	// Migrate brings the database at a URI to the backend's schema version (the
	// tenant's schema is the URI's search_path), and Open opens the backend's store on
	// the tables of the schema named schema.
	Migrate func(ctx context.Context, uri string) error
	Open    func(ctx context.Context, schema string) (store.Store, error)
	// Prefix starts the names of the tenants' schemas ("": latch_tenant_, Permify's
	// tenants); tenants of another API take a prefix of their own, so that neither
	// lists the other's.
	Prefix string
}

// Tenant is one tenant's record; Store is set by Existing and Create.
type Tenant struct {
	ID, Name string
	Created  time.Time
	Store    store.Store
}

// tenantMark is a tenant schema's comment.
type tenantMark struct {
	ID, Name string
	Created  time.Time
}

// tenantSchemaPrefix starts the name of every tenant schema.
const tenantSchemaPrefix = "latch_tenant_"

// schema names a tenant's schema: tenant ids may be longer than PostgreSQL's 63-byte
// identifiers and differ only in case, so the name is a digest of the id.
func (t Tenants) schema(id string) string {
	sum := sha256.Sum256([]byte(id))
	return t.prefix() + hex.EncodeToString(sum[:10])
}

func (t Tenants) prefix() string {
	if t.Prefix == "" {
		return tenantSchemaPrefix
	}
	return t.Prefix
}

// TenantURI is uri with its search_path set to schema, in either of the two forms
// PostgreSQL connection strings take.
func TenantURI(uri, schema string) (string, error) {
	if strings.HasPrefix(uri, "postgres://") || strings.HasPrefix(uri, "postgresql://") {
		u, err := url.Parse(uri)
		if err != nil {
			return "", fmt.Errorf("connection URI is not valid: %w", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return uri + " search_path=" + schema, nil
}

func (t Tenants) conn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, t.URI)
	if err != nil {
		return nil, Classify(ctx, t.Engine+": connecting to manage tenants", err)
	}
	return conn, nil
}

// Existing migrates and opens the store of every tenant whose creation finished.
func (t Tenants) Existing(ctx context.Context) ([]Tenant, error) {
	conn, err := t.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT nspname, coalesce(obj_description(oid, 'pg_namespace'), '')
		FROM pg_namespace WHERE nspname::text LIKE $1 ORDER BY nspname`, strings.ReplaceAll(t.prefix(), "_", `\_`)+"%")
	if err != nil {
		return nil, Classify(ctx, t.Engine+": listing tenants", err)
	}
	var marks []tenantMark
	for rows.Next() {
		var schema, comment string
		if err := rows.Scan(&schema, &comment); err != nil {
			return nil, Classify(ctx, t.Engine+": listing tenants", err)
		}
		var m tenantMark
		if json.Unmarshal([]byte(comment), &m) == nil && t.schema(m.ID) == schema {
			marks = append(marks, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, Classify(ctx, t.Engine+": listing tenants", err)
	}
	var out []Tenant
	for _, m := range marks {
		st, err := t.open(ctx, m.ID)
		if err != nil {
			for _, o := range out {
				_ = o.Store.Close()
			}
			return nil, fmt.Errorf("tenant %q: %w", m.ID, err)
		}
		out = append(out, Tenant{ID: m.ID, Name: m.Name, Created: m.Created, Store: st})
	}
	return out, nil
}

// open opens an existing tenant's store after bringing its schema to this latch's
// version: `latch datastore migrate` migrates the server's own schema, and the tenants'
// schemas, which the server made, are the server's to upgrade. Migrating a schema
// already at the version changes nothing.
func (t Tenants) open(ctx context.Context, id string) (store.Store, error) {
	uri, err := TenantURI(t.URI, t.schema(id))
	if err != nil {
		return nil, err
	}
	if err := t.Migrate(ctx, uri); err != nil {
		return nil, err
	}
	return t.Open(ctx, t.schema(id))
}

// Create makes a new tenant's schema, migrates it, marks it finished and opens its
// store. A schema left by a creation that did not finish is dropped first.
func (t Tenants) Create(ctx context.Context, tn Tenant) (store.Store, error) {
	conn, err := t.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	schema := pgx.Identifier{t.schema(tn.ID)}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return nil, Classify(ctx, t.Engine+": creating a tenant", err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return nil, Classify(ctx, t.Engine+": creating a tenant", err)
	}
	uri, err := TenantURI(t.URI, t.schema(tn.ID))
	if err == nil {
		err = t.Migrate(ctx, uri)
	}
	var mark []byte
	if err == nil {
		mark, err = json.Marshal(tenantMark{ID: tn.ID, Name: tn.Name, Created: tn.Created})
	}
	if err == nil {
		// COMMENT takes no parameters: the mark goes in as an escaped literal.
		_, err = conn.Exec(ctx, "COMMENT ON SCHEMA "+schema+" IS "+quoteLiteral(string(mark)))
		err = Classify(ctx, t.Engine+": creating a tenant", err)
	}
	var st store.Store
	if err == nil {
		st, err = t.Open(ctx, t.schema(tn.ID))
	}
	if err != nil {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		return nil, err
	}
	return st, nil
}

// Remove deletes a tenant with all its data, in one statement.
func (t Tenants) Remove(ctx context.Context, id string) error {
	conn, err := t.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{t.schema(id)}.Sanitize()+" CASCADE")
	return Classify(ctx, t.Engine+": deleting a tenant", err)
}

// quoteLiteral writes s as a standard SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
