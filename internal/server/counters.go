package server

import (
	"context"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/relcounter"
)

func (e *experimentalService) ExperimentalRegisterRelationshipCounter(ctx context.Context, req *v1.ExperimentalRegisterRelationshipCounterRequest) (*v1.ExperimentalRegisterRelationshipCounterResponse, error) {
	s := e.perms.s
	if req.GetName() == "" {
		return nil, s.status(&counterNameError{})
	}
	if err := s.checkFilterAtHead(ctx, req.GetRelationshipFilter(), nil); err != nil {
		return nil, s.status(err)
	}
	if err := relcounter.Register(ctx, s.store, req.GetName(), filterFromV1(req.GetRelationshipFilter())); err != nil {
		return nil, s.status(err)
	}
	return &v1.ExperimentalRegisterRelationshipCounterResponse{}, nil
}

func (e *experimentalService) ExperimentalCountRelationships(ctx context.Context, req *v1.ExperimentalCountRelationshipsRequest) (*v1.ExperimentalCountRelationshipsResponse, error) {
	s := e.perms.s
	filter, err := relcounter.Filter(ctx, s.store, req.GetName())
	if err != nil {
		return nil, s.status(err)
	}
	// At the head, as SpiceDB counts: a count read right after a write includes it.
	r, err := s.readerFor(ctx, headConsistency)
	if err != nil {
		return nil, s.status(err)
	}
	n, err := relcounter.Count(ctx, r, filter)
	if err != nil {
		return nil, s.status(err)
	}
	return &v1.ExperimentalCountRelationshipsResponse{CounterResult: &v1.ExperimentalCountRelationshipsResponse_ReadCounterValue{
		ReadCounterValue: &v1.ReadCounterValue{RelationshipCount: n, ReadAt: tokenFor(r.Revision())},
	}}, nil
}

// counterNameError: a counter registered without a name.
type counterNameError struct{}

func (*counterNameError) Error() string { return "name must be provided" }

func (e *experimentalService) ExperimentalUnregisterRelationshipCounter(ctx context.Context, req *v1.ExperimentalUnregisterRelationshipCounterRequest) (*v1.ExperimentalUnregisterRelationshipCounterResponse, error) {
	s := e.perms.s
	if err := relcounter.Unregister(ctx, s.store, req.GetName()); err != nil {
		return nil, s.status(err)
	}
	return &v1.ExperimentalUnregisterRelationshipCounterResponse{}, nil
}
