package server

import (
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
	"github.com/latch-authz/latch/internal/store"
)

// Wire ↔ domain conversions. The generated Validate has already run on every request,
// so the shapes here are trusted; nil sub-messages still convert to zero values rather
// than panic.

// relationshipToV1 converts a stored relationship for a response: a stored caveat
// context the wire cannot carry is the server's fault, not the caller's.
func relationshipToV1(r rel.Relationship) (*v1.Relationship, error) {
	out, err := relv1.Relationship(r)
	if err != nil {
		return nil, internalError{err}
	}
	return out, nil
}

// contextSize is the wire size of a relationship's caveat context, what
// MaxRelationshipContextBytes bounds.
func contextSize(r *v1.Relationship) int {
	return proto.Size(r.GetOptionalCaveat().GetContext())
}

func filterFromV1(f *v1.RelationshipFilter) store.Filter {
	out := store.Filter{
		ResourceType:     f.GetResourceType(),
		ResourceIDPrefix: f.GetOptionalResourceIdPrefix(),
		Relation:         f.GetOptionalRelation(),
	}
	if id := f.GetOptionalResourceId(); id != "" {
		out.ResourceIDs = []string{id}
	}
	if sf := f.GetOptionalSubjectFilter(); sf != nil {
		out.Subject = &store.SubjectFilter{Type: sf.GetSubjectType()}
		if id := sf.GetOptionalSubjectId(); id != "" {
			out.Subject.IDs = []string{id}
		}
		if rf := sf.GetOptionalRelation(); rf != nil {
			out.Subject.Relation = rf.GetRelation()
			out.Subject.RelationSet = true
		}
	}
	return out
}

func filterIsEmpty(f *v1.RelationshipFilter) bool {
	return f.GetResourceType() == "" && f.GetOptionalResourceId() == "" && f.GetOptionalResourceIdPrefix() == "" &&
		f.GetOptionalRelation() == "" && f.GetOptionalSubjectFilter() == nil
}

func preconditionsFromV1(ps []*v1.Precondition) ([]store.Precondition, error) {
	out := make([]store.Precondition, 0, len(ps))
	for _, p := range ps {
		if p.GetFilter() == nil || filterIsEmpty(p.GetFilter()) {
			return nil, &emptyPreconditionError{}
		}
		op := store.MustMatch
		if p.GetOperation() == v1.Precondition_OPERATION_MUST_NOT_MATCH {
			op = store.MustNotMatch
		}
		out = append(out, store.Precondition{Op: op, Filter: filterFromV1(p.GetFilter())})
	}
	return out, nil
}

func updateOpFromV1(op v1.RelationshipUpdate_Operation) store.Op {
	switch op {
	case v1.RelationshipUpdate_OPERATION_CREATE:
		return store.Create
	case v1.RelationshipUpdate_OPERATION_DELETE:
		return store.Delete
	default:
		return store.Touch
	}
}

func checkRequestFromV1(res *v1.ObjectReference, perm string, sub *v1.SubjectReference, ctx *structpb.Struct) engine.CheckRequest {
	return engine.CheckRequest{
		Resource:   relv1.FromObject(res),
		Permission: perm,
		Subject:    relv1.FromSubject(sub),
		Context:    relv1.FromContext(ctx),
	}
}

func permissionshipToV1(m engine.Membership) v1.CheckPermissionResponse_Permissionship {
	switch m {
	case engine.HasPermission:
		return v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION
	case engine.Conditional:
		return v1.CheckPermissionResponse_PERMISSIONSHIP_CONDITIONAL_PERMISSION
	default:
		return v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION
	}
}

func partialCaveatInfo(r engine.Result) *v1.PartialCaveatInfo {
	if r.Membership != engine.Conditional {
		return nil
	}
	return &v1.PartialCaveatInfo{MissingRequiredContext: r.Missing}
}
