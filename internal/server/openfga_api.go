package server

import (
	"context"
	"net/http"
	"strings"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/server/openfga"
)

// fgaStoreCacheBytes is the block cache of each OpenFGA store kept in pebble: a
// store per tenant of an application, or per test of a suite, is common, and each
// is a pebble database of its own.
const fgaStoreCacheBytes = 8 << 20

// openFGA makes OpenFGA's service (unless disabled), with its stores beside the
// server's data: DIR.openfga/ID in pebble, schemas latch_fga_store_* in SQL.
func (s *Server) openFGA() error {
	c := s.cfg.OpenFGA
	if c.Disabled {
		return nil
	}
	svc, err := openfga.New(openfga.Config{
		Engine:                        s.engine,
		Stores:                        s.tenantStoresIn(".openfga", "latch_fga_store_", fgaStoreCacheBytes),
		MaxStores:                     c.MaxStores,
		MaxTuplesPerWrite:             c.MaxTuplesPerWrite,
		MaxChecksPerBatch:             c.MaxChecksPerBatch,
		ListObjectsMaxResults:         c.ListObjectsMaxResults,
		StreamedListObjectsMaxResults: c.StreamedListObjectsMaxResults,
		QuantizationWindow:            s.cfg.QuantizationWindow,
		MaxStalenessPercent:           s.cfg.MaxStalenessPercent,
	})
	if err != nil {
		return err
	}
	s.fga = svc
	return nil
}

// OpenFGA returns the OpenFGA service (nil when disabled), for the APIs that serve
// its stores too.
func (s *Server) OpenFGA() *openfga.Service { return s.fga }

// withOpenFGA serves OpenFGA's HTTP API (/stores and /stores/...) beside next: its
// grpc-gateway handlers over the gateway's loopback connection, so auth, admission,
// metrics and tracing are the gRPC calls'.
func (s *Server) withOpenFGA(next http.Handler) (http.Handler, error) {
	if s.fga == nil {
		return next, nil
	}
	gw, err := openfga.Gateway(context.Background(), openfgav1.NewOpenFGAServiceClient(s.gwConn))
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stores" || strings.HasPrefix(r.URL.Path, "/stores/") {
			gw.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}
