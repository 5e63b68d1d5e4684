package openfga

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/revision"
	"github.com/latch-authz/latch/internal/server/permify"
	"github.com/latch-authz/latch/internal/store"
)

// fgaStore is one OpenFGA store: a datastore, its engine, and what its models
// document parses and compiles to.
type fgaStore struct {
	id, name  string
	created   time.Time
	data      store.Store
	engine    *engine.Engine
	quantizer *revision.Quantizer

	docMu sync.Mutex // serializes rewrites of the models document

	cacheMu  sync.Mutex
	doc      *parsedDoc                // guarded by cacheMu; the last document parsed
	docRev   store.Revision            // guarded by cacheMu; the newest revision doc was read at
	compiled map[string]*compiledModel // guarded by cacheMu; by model id
}

func (s *Service) newStore(t permify.TenantInfo) *fgaStore {
	st := &fgaStore{
		id: t.ID, name: t.Name, created: t.Created, data: t.Store,
		engine: s.cfg.Engine.Sibling(nil), compiled: map[string]*compiledModel{},
	}
	st.quantizer = revision.NewQuantizer(s.cfg.QuantizationWindow, s.cfg.MaxStalenessPercent, t.Store.HeadRevision)
	return st
}

// proto describes the store as OpenFGA does, with its name and update time from its
// document.
func (st *fgaStore) proto(ctx context.Context) (*openfgav1.Store, error) {
	doc, err := st.document(ctx)
	if err != nil {
		return nil, err
	}
	name, updated := st.name, st.created
	if doc.Name != "" {
		name = doc.Name
	}
	if !doc.Updated.IsZero() {
		updated = doc.Updated
	}
	return &openfgav1.Store{Id: st.id, Name: name, CreatedAt: timestamppb.New(st.created), UpdatedAt: timestamppb.New(updated)}, nil
}

// CreateStore makes a store with an empty datastore; its id is a ULID.
func (s *Service) CreateStore(ctx context.Context, req *openfgav1.CreateStoreRequest) (*openfgav1.CreateStoreResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fgaError(openfgav1.InternalErrorCode_unavailable, "the server is shutting down")
	}
	if s.cfg.MaxStores > 0 && len(s.stores)+s.creating >= s.cfg.MaxStores {
		s.mu.Unlock()
		return nil, fgaError(openfgav1.ErrorCode_exceeded_entity_limit, "The number of stores exceeds the allowed limit of %d", s.cfg.MaxStores)
	}
	s.creating++
	s.mu.Unlock()
	info := permify.TenantInfo{ID: ulid.Make().String(), Name: req.GetName(), Created: time.Now().UTC().Truncate(time.Microsecond)}
	data, err := s.cfg.Stores.Create(info)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creating--
	if err != nil {
		return nil, storeError(err)
	}
	if s.closed {
		_ = data.Close()
		return nil, fgaError(openfgav1.InternalErrorCode_unavailable, "the server is shutting down")
	}
	info.Store = data
	st := s.newStore(info)
	s.stores[info.ID] = st
	ts := timestamppb.New(info.Created)
	setHTTPCode(ctx, http.StatusCreated)
	return &openfgav1.CreateStoreResponse{Id: info.ID, Name: info.Name, CreatedAt: ts, UpdatedAt: ts}, nil
}

// GetStore describes a store.
func (s *Service) GetStore(ctx context.Context, req *openfgav1.GetStoreRequest) (*openfgav1.GetStoreResponse, error) {
	st, err := s.storeFor(req)
	if err != nil {
		return nil, err
	}
	p, err := st.proto(ctx)
	if err != nil {
		return nil, err
	}
	return &openfgav1.GetStoreResponse{Id: p.Id, Name: p.Name, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}, nil
}

// UpdateStore renames a store; the name is kept in its document.
func (s *Service) UpdateStore(ctx context.Context, req *openfgav1.UpdateStoreRequest) (*openfgav1.UpdateStoreResponse, error) {
	st, err := s.storeFor(req)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	err = st.rewrite(ctx, func(d *document) error {
		d.Name, d.Updated = req.GetName(), now
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &openfgav1.UpdateStoreResponse{Id: st.id, Name: req.GetName(), CreatedAt: timestamppb.New(st.created), UpdatedAt: timestamppb.New(now)}, nil
}

// DeleteStore deletes a store and all its data. Unlike OpenFGA, which marks a store
// deleted and keeps its rows, the data is gone.
func (s *Service) DeleteStore(ctx context.Context, req *openfgav1.DeleteStoreRequest) (*openfgav1.DeleteStoreResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	st, ok := s.stores[req.GetStoreId()]
	if !ok || s.closed {
		s.mu.Unlock()
		return nil, storeNotFound()
	}
	delete(s.stores, st.id)
	s.mu.Unlock()
	_ = st.data.Close()
	if err := s.cfg.Stores.Remove(st.id); err != nil {
		return nil, storeError(err)
	}
	return &openfgav1.DeleteStoreResponse{}, nil
}

// ListStores lists stores in id order (creation order: ids are ULIDs), a page at a
// time; the continuation token is the last id of the page.
func (s *Service) ListStores(ctx context.Context, req *openfgav1.ListStoresRequest) (*openfgav1.ListStoresResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	after, err := decodeToken(req.GetContinuationToken(), "stores")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	list := make([]*fgaStore, 0, len(s.stores))
	for id, st := range s.stores {
		if id > after {
			list = append(list, st)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *fgaStore) int { return strings.Compare(a.id, b.id) })
	out := &openfgav1.ListStoresResponse{}
	for _, st := range list {
		p, err := st.proto(ctx)
		if err != nil {
			return nil, err
		}
		if req.GetName() != "" && p.Name != req.GetName() {
			continue
		}
		if len(out.Stores) == size {
			out.ContinuationToken = encodeToken("stores", out.Stores[size-1].Id)
			break
		}
		out.Stores = append(out.Stores, p)
	}
	return out, nil
}

// pageSize is a request's page size: OpenFGA's default when absent.
func pageSize(p interface{ GetValue() int32 }) (int, error) {
	if p == nil || p.GetValue() == 0 {
		return defaultPageSize, nil
	}
	if v := p.GetValue(); v < 1 || v > maxPageSize {
		return 0, fgaError(openfgav1.ErrorCode_page_size_invalid, "page_size must be between 1 and %d", maxPageSize)
	}
	return int(p.GetValue()), nil
}

// encodeToken makes a continuation token: what it resumes (kind) and where.
func encodeToken(kind, pos string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + pos))
}

// decodeToken returns the position of a token of kind ("" for no token).
func decodeToken(tok, kind string) (string, error) {
	if tok == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", invalidContinuationToken()
	}
	pos, ok := strings.CutPrefix(string(raw), kind+":")
	if !ok {
		return "", invalidContinuationToken()
	}
	return pos, nil
}
