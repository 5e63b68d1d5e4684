// Package openfga serves OpenFGA's API (openfga.v1.OpenFGAService, over gRPC and over
// its HTTP paths /stores/...) over latch's engine and stores. Each OpenFGA store is a
// tenant with a datastore of its own, kept like Permify's tenants (permify.TenantStores:
// memory, pebble directories, SQL schemas); its authorization models and assertions
// are the store's schema text (models.go), so they are as durable as its tuples and
// change in the store's own transactions. The OpenFGA language and semantics (tuple
// translation, compiled models, contextual tuples, ListUsers) are package fga's; this
// package is the wire: requests in, store and engine calls, OpenFGA's answers and
// error codes out.
package openfga

import (
	"context"
	"sync"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/server/permify"
)

// Defaults OpenFGA itself uses.
const (
	DefaultMaxTuplesPerWrite     = 100
	DefaultListObjectsMaxResults = 1000
	DefaultMaxChecksPerBatch     = 50
	defaultPageSize              = 50
	maxPageSize                  = 100
)

// Config is what the service needs from the server.
type Config struct {
	// Engine evaluates; each store gets a sibling of it (Engine.Sibling).
	Engine *engine.Engine
	// Stores keeps the stores' datastores (with permify's tenants' mechanism, under a
	// namespace of their own).
	Stores permify.TenantStores
	// MaxStores bounds the stores (0: no bound).
	MaxStores int
	// MaxTuplesPerWrite bounds writes plus deletes in one Write (0: OpenFGA's 100).
	MaxTuplesPerWrite int
	// ListObjectsMaxResults caps ListObjects' answer (0: OpenFGA's 1,000; negative:
	// no cap), StreamedListObjectsMaxResults StreamedListObjects' (0: no cap).
	ListObjectsMaxResults, StreamedListObjectsMaxResults int
	// MaxChecksPerBatch bounds the checks of one BatchCheck (0: OpenFGA's 50).
	MaxChecksPerBatch int
	// QuantizationWindow and MaxStalenessPercent pick the revision of
	// MINIMIZE_LATENCY reads, as for the SpiceDB API's minimize_latency.
	QuantizationWindow  time.Duration
	MaxStalenessPercent int
}

// Service is the OpenFGA service. Close releases the stores it opened.
type Service struct {
	openfgav1.UnimplementedOpenFGAServiceServer
	cfg Config

	mu       sync.Mutex
	stores   map[string]*fgaStore // guarded by mu
	creating int                  // guarded by mu; stores being made
	closed   bool                 // guarded by mu
}

// New returns the service with the stores cfg.Stores kept from earlier runs.
func New(cfg Config) (*Service, error) {
	if cfg.MaxTuplesPerWrite <= 0 {
		cfg.MaxTuplesPerWrite = DefaultMaxTuplesPerWrite
	}
	if cfg.ListObjectsMaxResults == 0 {
		cfg.ListObjectsMaxResults = DefaultListObjectsMaxResults
	}
	if cfg.MaxChecksPerBatch <= 0 {
		cfg.MaxChecksPerBatch = DefaultMaxChecksPerBatch
	}
	s := &Service{cfg: cfg, stores: map[string]*fgaStore{}}
	existing, err := cfg.Stores.Existing()
	if err != nil {
		return nil, err
	}
	for _, t := range existing {
		s.stores[t.ID] = s.newStore(t)
	}
	return s, nil
}

// Close closes every store's datastore.
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, st := range s.stores {
		_ = st.data.Close()
	}
}

// store returns the store a request names.
func (s *Service) store(id string) (*fgaStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.stores[id]; ok && !s.closed {
		return st, nil
	}
	return nil, storeNotFound()
}

// storeRequest is a request naming a store.
type storeRequest interface {
	Validate() error
	GetStoreId() string
}

// storeFor validates req and returns the store it names.
func (s *Service) storeFor(req storeRequest) (*fgaStore, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	return s.store(req.GetStoreId())
}

// Store is what other APIs serving OpenFGA's stores (AuthZEN's) need of one: its
// engine, a reader at the revision consistency picks, and the model a request runs
// with (modelID "" for the latest).
func (s *Service) Store(ctx context.Context, id, modelID string, c openfgav1.ConsistencyPreference) (*Snapshot, error) {
	st, err := s.store(id)
	if err != nil {
		return nil, err
	}
	return st.snapshot(ctx, modelID, c)
}
