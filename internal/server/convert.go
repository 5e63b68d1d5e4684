package server

import (
	"fmt"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// Wire ↔ domain conversions. The generated Validate has already run on every request,
// so the shapes here are trusted; nil sub-messages still convert to zero values rather
// than panic.

func objectFromV1(o *v1.ObjectReference) rel.ObjectRef {
	return rel.ObjectRef{Type: o.GetObjectType(), ID: o.GetObjectId()}
}

func subjectFromV1(s *v1.SubjectReference) rel.SubjectRef {
	return rel.SubjectRef{Object: objectFromV1(s.GetObject()), Relation: s.GetOptionalRelation()}
}

func objectToV1(o rel.ObjectRef) *v1.ObjectReference {
	return &v1.ObjectReference{ObjectType: o.Type, ObjectId: o.ID}
}

func subjectToV1(s rel.SubjectRef) *v1.SubjectReference {
	return &v1.SubjectReference{Object: objectToV1(s.Object), OptionalRelation: s.Relation}
}

// contextFromV1 turns a request or stored caveat context into plain Go values
// (numbers become float64, as JSON's do).
func contextFromV1(s *structpb.Struct) map[string]any {
	if s == nil || len(s.GetFields()) == 0 {
		return nil
	}
	return s.AsMap()
}

func relationshipFromV1(r *v1.Relationship) rel.Relationship {
	out := rel.Relationship{
		Resource: objectFromV1(r.GetResource()),
		Relation: r.GetRelation(),
		Subject:  subjectFromV1(r.GetSubject()),
	}
	if c := r.GetOptionalCaveat(); c != nil && c.GetCaveatName() != "" {
		out.Caveat = &rel.Caveat{Name: c.GetCaveatName(), Context: contextFromV1(c.GetContext())}
	}
	if e := r.GetOptionalExpiresAt(); e != nil {
		t := e.AsTime()
		out.Expiration = &t
	}
	return out
}

func relationshipToV1(r rel.Relationship) (*v1.Relationship, error) {
	out := &v1.Relationship{
		Resource: objectToV1(r.Resource),
		Relation: r.Relation,
		Subject:  subjectToV1(r.Subject),
	}
	if r.Caveat != nil {
		c := &v1.ContextualizedCaveat{CaveatName: r.Caveat.Name}
		if len(r.Caveat.Context) > 0 {
			st, err := structpb.NewStruct(r.Caveat.Context)
			if err != nil {
				return nil, fmt.Errorf("stored caveat context of %s: %w", rel.String(r), internalError{err})
			}
			c.Context = st
		}
		out.OptionalCaveat = c
	}
	if r.Expiration != nil {
		out.OptionalExpiresAt = timestamppb.New(r.Expiration.UTC())
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
		Resource:   objectFromV1(res),
		Permission: perm,
		Subject:    subjectFromV1(sub),
		Context:    contextFromV1(ctx),
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
