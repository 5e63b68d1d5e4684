package fga

import (
	"context"
	"errors"
	"slices"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// ListObjects answers OpenFGA's ListObjects with e (an engine with OpenFGA's
// semantics) on r (from m.Reader): the ids of the objects of req.ResourceType on
// which req.Subject has req.Permission, sorted. A result that depends on condition
// parameters the request lacks is an engine.MissingParamsError.
//
// The engine's lookup follows the data forwards and fails on a cycle in it, which
// OpenFGA resolves; then every object of the type in the store is checked instead,
// each check resolving cycles as OpenFGA does.
func ListObjects(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, req engine.LookupResourcesRequest) ([]string, error) {
	var ids []string
	var missing []string
	err := e.LookupResources(ctx, m.Schema, r, req, func(f engine.FoundResource) error {
		if f.Result.Membership == engine.Conditional {
			missing = append(missing, f.Result.Missing...)
			return nil
		}
		ids = append(ids, f.ID)
		return nil
	})
	if errors.Is(err, engine.ErrMaxDepth) {
		return listByChecks(ctx, e, m, r, req)
	}
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, missingError(missing)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// listByChecks checks every object of the type that some tuple names.
func listByChecks(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, req engine.LookupResourcesRequest) ([]string, error) {
	cands, err := objectsOf(ctx, r, req.ResourceType)
	if err != nil {
		return nil, err
	}
	checks := make([]engine.CheckRequest, len(cands))
	for i, id := range cands {
		checks[i] = engine.CheckRequest{Resource: rel.ObjectRef{Type: req.ResourceType, ID: id}, Permission: req.Permission, Subject: req.Subject, Context: req.Context}
	}
	var out []string
	for i, res := range e.CheckBulk(ctx, m.Schema, r, checks) {
		if res.Err != nil {
			return nil, res.Err
		}
		ok, err := Allowed(res.Result)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, cands[i])
		}
	}
	return out, nil
}

// objectsOf returns, sorted, the ids of the objects of typ that some tuple names, as
// its object or its user (wildcards aside).
func objectsOf(ctx context.Context, r store.Reader, typ string) ([]string, error) {
	var ids []string
	for _, f := range []store.Filter{{ResourceType: typ}, {Subject: &store.SubjectFilter{Type: typ}}} {
		for item, err := range r.Query(ctx, f, store.QueryOptions{}) {
			if err != nil {
				return nil, err
			}
			x := item.Relationship
			if f.Subject == nil {
				ids = append(ids, x.Resource.ID)
			} else if x.Subject.Object.ID != rel.Wildcard {
				ids = append(ids, x.Subject.Object.ID)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// ListUsers answers OpenFGA's ListUsers with e (an engine with OpenFGA's semantics)
// on r (from m.Reader): for each filter, the users of its type (`user:anne`, and
// `user:*` when the wildcard has the relation) or of its subject set
// (`group:eng#member`) that have relation on object. Users are in filter order, each
// filter's sorted, wildcard first.
func ListUsers(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, object rel.ObjectRef, relation string, filters []*openfgav1.UserTypeFilter, reqCtx map[string]any) ([]*openfgav1.User, error) {
	if err := m.validateTarget(object.Type, relation); err != nil {
		return nil, err
	}
	var out []*openfgav1.User
	for _, f := range filters {
		if err := m.validateUser(rel.SubjectRef{Object: rel.ObjectRef{Type: f.GetType()}, Relation: f.GetRelation()}); err != nil {
			return nil, err
		}
		users, err := usersOf(ctx, e, m, r, object, relation, f, reqCtx)
		if err != nil {
			return nil, err
		}
		out = append(out, users...)
	}
	return out, nil
}

// usersOf answers ListUsers for one filter.
func usersOf(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, object rel.ObjectRef, relation string, f *openfgav1.UserTypeFilter, reqCtx map[string]any) ([]*openfgav1.User, error) {
	req := engine.LookupSubjectsRequest{Resource: object, Permission: relation, SubjectType: f.GetType(), SubjectRelation: f.GetRelation(), Context: reqCtx}
	var ids, missing []string
	err := e.LookupSubjects(ctx, m.Schema, r, req, func(s engine.FoundSubject) error {
		if s.Result.Membership == engine.Conditional {
			missing = append(missing, s.Result.Missing...)
			return nil
		}
		ids = append(ids, s.ID)
		return nil
	})
	if errors.Is(err, engine.ErrMaxDepth) {
		ids, err = usersByChecks(ctx, e, m, r, object, relation, f, reqCtx)
	}
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, missingError(missing)
	}
	slices.SortFunc(ids, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == rel.Wildcard:
			return -1
		case b == rel.Wildcard:
			return 1
		case a < b:
			return -1
		}
		return 1
	})
	ids = slices.Compact(ids)
	out := make([]*openfgav1.User, 0, len(ids))
	for _, id := range ids {
		out = append(out, user(f, id))
	}
	return out, nil
}

// usersByChecks checks, for one filter, the wildcard (of a plain type) and every
// object of the type that some tuple names.
func usersByChecks(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, object rel.ObjectRef, relation string, f *openfgav1.UserTypeFilter, reqCtx map[string]any) ([]string, error) {
	cands, err := objectsOf(ctx, r, f.GetType())
	if err != nil {
		return nil, err
	}
	if f.GetRelation() == "" {
		cands = append(cands, rel.Wildcard)
	}
	checks := make([]engine.CheckRequest, len(cands))
	for i, id := range cands {
		checks[i] = engine.CheckRequest{
			Resource: object, Permission: relation, Context: reqCtx,
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: f.GetType(), ID: id}, Relation: f.GetRelation()},
		}
	}
	var out []string
	for i, res := range e.CheckBulk(ctx, m.Schema, r, checks) {
		if res.Err != nil {
			return nil, res.Err
		}
		ok, err := Allowed(res.Result)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, cands[i])
		}
	}
	return out, nil
}

// user is one ListUsers answer of filter f.
func user(f *openfgav1.UserTypeFilter, id string) *openfgav1.User {
	switch {
	case id == rel.Wildcard:
		return &openfgav1.User{User: &openfgav1.User_Wildcard{Wildcard: &openfgav1.TypedWildcard{Type: f.GetType()}}}
	case f.GetRelation() != "":
		return &openfgav1.User{User: &openfgav1.User_Userset{Userset: &openfgav1.UsersetUser{Type: f.GetType(), Id: id, Relation: f.GetRelation()}}}
	}
	return &openfgav1.User{User: &openfgav1.User_Object{Object: &openfgav1.Object{Type: f.GetType(), Id: id}}}
}

func missingError(missing []string) error {
	slices.Sort(missing)
	return &engine.MissingParamsError{Missing: slices.Compact(missing)}
}
