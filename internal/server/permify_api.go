package server

import (
	"fmt"
	"net/http"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/server/permify"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/store/pebble"
)

// withPermify serves Permify's HTTP API under /v1/tenants/ beside next (the SpiceDB
// gateway) on the same listener. Tenant t1 is this server's store; tenants created
// through the API get stores of their own: pebble directories beside the server's
// (DIR.tenants/ID) when it runs on pebble, memory stores otherwise. The returned func
// closes those stores.
func (s *Server) withPermify(next http.Handler) (http.Handler, func(), error) {
	keys := s.cfg.PresharedKeys
	if len(keys) == 0 {
		keys = []string{s.generated}
	}
	auth := newAuthenticator(keys)
	var tenants permify.TenantStores = permify.MemoryTenants{Options: memory.Options{GCWindow: s.cfg.GCWindow}}
	if s.cfg.Datastore == nil && s.cfg.DatastoreEngine == "pebble" {
		dir := s.cfg.DatastoreURI
		if dir == "" {
			dir = DefaultDataDir
		}
		tenants = permify.PebbleTenants{Dir: filepath.Clean(dir) + ".tenants", Options: pebble.Options{GCWindow: s.cfg.GCWindow}}
	}
	h, err := permify.New(permify.Config{
		Engine:        s.engine,
		Default:       s.store,
		SharedDefault: true,
		Tenants:       tenants,
		Authorize: func(r *http.Request) error {
			md := metadata.Pairs("authorization", r.Header.Get("Authorization"))
			err := auth.check(metadata.NewIncomingContext(r.Context(), md))
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
	mux.Handle("/v1/tenants/", h)
	mux.Handle("/", next)
	return mux, h.Close, nil
}
