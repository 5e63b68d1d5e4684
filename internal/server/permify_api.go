package server

import (
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/server/permify"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// withPermify serves Permify's HTTP API under /v1/tenants/ beside next (the SpiceDB
// gateway) on the same listener. Tenant t1 is this server's store; tenants created
// through the API live in memory stores of their own (isolated, not durable). The
// returned func closes those stores.
func (s *Server) withPermify(next http.Handler) (http.Handler, func()) {
	keys := s.cfg.PresharedKeys
	if len(keys) == 0 {
		keys = []string{s.generated}
	}
	auth := newAuthenticator(keys)
	h := permify.New(permify.Config{
		Engine:        s.engine,
		Default:       s.store,
		SharedDefault: true,
		NewStore: func() store.Store {
			return memory.New(memory.Options{GCWindow: s.cfg.GCWindow})
		},
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
			return permify.NewError(int(st.Code()), reason, st.Message())
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/v1/tenants/", h)
	mux.Handle("/", next)
	return mux, h.Close
}
