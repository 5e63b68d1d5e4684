package server

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/server/permify"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/crdb"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/store/pebble"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// withPermify serves Permify's HTTP API under /v1/tenants/ beside next (the SpiceDB
// gateway) on the same listener. Tenant t1 is this server's store; tenants created
// through the API get stores of their own (tenantStores). The returned func closes
// those stores.
func (s *Server) withPermify(next http.Handler) (http.Handler, func(), error) {
	var newIndex func(string, store.Store, func(context.Context, store.Revision) (*ir.Schema, error)) (engine.SetIndex, func())
	if !s.cfg.MaterializeDisabled {
		newIndex = func(tenant string, st store.Store, schemaAt func(context.Context, store.Revision) (*ir.Schema, error)) (engine.SetIndex, func()) {
			x, stop := s.newIndex(st, schemaAt, s.cfg.Logger.With("tenant", tenant), tenantIndexPoll)
			forget := s.tenantIndexes.add(tenant, x)
			return x, func() {
				forget()
				stop()
			}
		}
	}
	h, err := permify.New(permify.Config{
		Engine:             s.engine,
		Default:            s.store,
		SharedDefault:      true,
		Tenants:            s.tenantStores(),
		MaxTenants:         s.cfg.MaxTenants,
		StreamStallTimeout: s.cfg.StreamStallTimeout,
		NewIndex:           newIndex,
		Authorize: func(r *http.Request) error {
			md := metadata.Pairs("authorization", r.Header.Get("Authorization"))
			err := s.auth.check(metadata.NewIncomingContext(r.Context(), md))
			if err == nil {
				return nil
			}
			st, _ := status.FromError(err)
			reason := "ERROR_CODE_UNAUTHENTICATED"
			if st.Code() == codes.Unauthenticated && r.Header.Get("Authorization") == "" {
				reason = "ERROR_CODE_MISSING_BEARER_TOKEN"
			}
			return permify.NewError(st.Code(), reason, st.Message())
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("opening the Permify tenants: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/tenants/", s.adm.guard(permifySurface, h))
	mux.Handle("/", next)
	return mux, h.Close, nil
}

// permifySurface admits Permify's calls in the API's classes: lookups and reads as
// expensive, the rest (checks, writes, tenants) as cheap.
var permifySurface = httpSurface{
	classOf: func(r *http.Request) admissionClass {
		if permify.Expensive(r.URL.Path) {
			return classExpensive
		}
		return classCheap
	},
	overloaded: func(w http.ResponseWriter, err *overloadError) {
		permify.WriteError(w, permify.Overloaded(err.Error()))
	},
}

// tenantIndexPoll is how often a tenant's index polls a SQL store's change feed: a
// hundred tenants' indexes ask the database 100 times a second, and a read of a
// revision an index has not applied is evaluated meanwhile.
const tenantIndexPoll = time.Second

// tenantConns sizes each CockroachDB tenant store's pools: tenants share the
// database server with t1, and a tenant's traffic rarely needs more.
const tenantConns = 4

// tenantStores keeps Permify's tenants (tenantStoresIn).
func (s *Server) tenantStores() permify.TenantStores {
	return s.tenantStoresIn(".tenants", "", s.cfg.DatastoreBlockCacheBytes)
}

// tenantStoresIn keeps tenants as durable as the server's own data: pebble directories
// beside the server's (DIR+dirSuffix/ID, each with a block cache of cacheBytes), or a
// schema each in the PostgreSQL or CockroachDB database (named with schemaPrefix; ""
// for Permify's); a memory server's tenants are memory stores. PostgreSQL tenants use
// the server's connection pools (postgres.Store.InSchema), so tenants cost the
// database no connections. Each API's tenants live apart from the others'.
func (s *Server) tenantStoresIn(dirSuffix, schemaPrefix string, cacheBytes int64) permify.TenantStores {
	cfg := s.cfg
	if cfg.Datastore != nil || cfg.DatastoreEngine == "memory" {
		return permify.MemoryTenants{Options: memory.Options{GCWindow: cfg.GCWindow}}
	}
	switch base := s.store.(type) {
	case *postgres.Store:
		return permify.SQLTenants{Tenants: sqlstore.Tenants{
			URI: cfg.DatastoreURI, Engine: "postgres", Migrate: postgres.Migrate, Prefix: schemaPrefix,
			Open: func(ctx context.Context, schema string) (store.Store, error) {
				return base.InSchema(ctx, schema, postgres.Options{GCWindow: cfg.GCWindow})
			},
		}}
	case *crdb.Store:
		return permify.SQLTenants{Tenants: sqlstore.Tenants{
			URI: cfg.DatastoreURI, Engine: "cockroachdb", Migrate: crdb.Migrate, Prefix: schemaPrefix,
			Open: func(ctx context.Context, schema string) (store.Store, error) {
				uri, err := sqlstore.TenantURI(cfg.DatastoreURI, schema)
				if err != nil {
					return nil, err
				}
				return crdb.Open(ctx, uri, crdb.Options{ReadConns: tenantConns, WriteConns: tenantConns, GCWindow: cfg.GCWindow})
			},
		}}
	}
	dir := cfg.DatastoreURI
	if dir == "" {
		dir = DefaultDataDir
	}
	return permify.PebbleTenants{Dir: filepath.Clean(dir) + dirSuffix, Options: pebble.Options{GCWindow: cfg.GCWindow, CacheSize: cacheBytes}}
}
