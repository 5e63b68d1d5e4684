package server

import (
	"context"
	"fmt"
	"sync"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/store"
)

// relationshipCounters are ExperimentalService's named relationship counters: a
// registered filter whose matching relationships are counted on demand, at a recent
// (quantized) revision. Registrations live in the server's memory: a restart forgets
// them, and each server of a cluster has its own.
type relationshipCounters struct {
	mu      sync.Mutex
	filters map[string]*v1.RelationshipFilter // guarded by mu
}

// counterExistsError: a counter with that name is already registered.
type counterExistsError struct{ name string }

func (e *counterExistsError) Error() string {
	return fmt.Sprintf("a relationship counter named `%s` is already registered", e.name)
}

// counterUnknownError: no counter has that name.
type counterUnknownError struct{ name string }

func (e *counterUnknownError) Error() string {
	return fmt.Sprintf("no relationship counter named `%s` is registered", e.name)
}

func (e *experimentalService) ExperimentalRegisterRelationshipCounter(ctx context.Context, req *v1.ExperimentalRegisterRelationshipCounterRequest) (*v1.ExperimentalRegisterRelationshipCounterResponse, error) {
	s := e.perms.s
	if err := s.checkFilterAtHead(ctx, req.GetRelationshipFilter(), nil); err != nil {
		return nil, s.status(err)
	}
	c := &s.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.filters[req.GetName()]; ok {
		return nil, s.status(&counterExistsError{req.GetName()})
	}
	if c.filters == nil {
		c.filters = map[string]*v1.RelationshipFilter{}
	}
	c.filters[req.GetName()] = proto.Clone(req.GetRelationshipFilter()).(*v1.RelationshipFilter)
	return &v1.ExperimentalRegisterRelationshipCounterResponse{}, nil
}

func (e *experimentalService) ExperimentalCountRelationships(ctx context.Context, req *v1.ExperimentalCountRelationshipsRequest) (*v1.ExperimentalCountRelationshipsResponse, error) {
	s := e.perms.s
	s.counters.mu.Lock()
	filter, ok := s.counters.filters[req.GetName()]
	s.counters.mu.Unlock()
	if !ok {
		return nil, s.status(&counterUnknownError{req.GetName()})
	}
	r, err := s.readerFor(ctx, nil)
	if err != nil {
		return nil, s.status(err)
	}
	var n uint64
	for _, err := range r.Query(ctx, filterFromV1(filter), store.QueryOptions{}) {
		if err != nil {
			return nil, s.status(err)
		}
		n++
	}
	return &v1.ExperimentalCountRelationshipsResponse{CounterResult: &v1.ExperimentalCountRelationshipsResponse_ReadCounterValue{
		ReadCounterValue: &v1.ReadCounterValue{RelationshipCount: n, ReadAt: tokenFor(r.Revision())},
	}}, nil
}

func (e *experimentalService) ExperimentalUnregisterRelationshipCounter(ctx context.Context, req *v1.ExperimentalUnregisterRelationshipCounterRequest) (*v1.ExperimentalUnregisterRelationshipCounterResponse, error) {
	s := e.perms.s
	s.counters.mu.Lock()
	defer s.counters.mu.Unlock()
	if _, ok := s.counters.filters[req.GetName()]; !ok {
		return nil, s.status(&counterUnknownError{req.GetName()})
	}
	delete(s.counters.filters, req.GetName())
	return &v1.ExperimentalUnregisterRelationshipCounterResponse{}, nil
}
