package fga

import (
	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// CheckRequest returns the engine's check of user having relation on object, with
// the request's condition context, validated as OpenFGA validates a Check: every
// problem is an *Error with ErrorCode_validation_error.
func (m *Model) CheckRequest(object, relation, user string, context *structpb.Struct) (engine.CheckRequest, error) {
	obj, err := ParseObject(object)
	if err != nil {
		return engine.CheckRequest{}, newError(openfgav1.ErrorCode_validation_error, "%v", err)
	}
	subj, err := ParseUser(user)
	if err != nil {
		return engine.CheckRequest{}, newError(openfgav1.ErrorCode_validation_error, "%v", err)
	}
	if err := m.validateTarget(obj.Type, relation); err != nil {
		return engine.CheckRequest{}, newError(openfgav1.ErrorCode_validation_error, "%v", err)
	}
	if err := m.validateUser(subj); err != nil {
		return engine.CheckRequest{}, newError(openfgav1.ErrorCode_validation_error, "%v", err)
	}
	return engine.CheckRequest{Resource: obj, Permission: relation, Subject: subj, Context: context.AsMap()}, nil
}

// LookupResourcesRequest returns the engine's lookup of the objects of typ on which
// user has relation (OpenFGA's ListObjects), validated as OpenFGA validates it: an
// unknown type or relation is ir.UnknownDefinitionError or ir.UnknownRelationError
// (ErrorCode maps them), a malformed or unknown user an *Error.
func (m *Model) LookupResourcesRequest(typ, relation, user string, context *structpb.Struct) (engine.LookupResourcesRequest, error) {
	if err := m.validateTarget(typ, relation); err != nil {
		return engine.LookupResourcesRequest{}, err
	}
	subj, err := ParseUser(user)
	if err != nil {
		return engine.LookupResourcesRequest{}, newError(openfgav1.ErrorCode_validation_error, "%v", err)
	}
	if err := m.validateUser(subj); err != nil {
		return engine.LookupResourcesRequest{}, newError(openfgav1.ErrorCode_validation_error, "%v", err)
	}
	return engine.LookupResourcesRequest{ResourceType: typ, Permission: relation, Subject: subj, Context: context.AsMap()}, nil
}

// validateTarget refuses a type or relation the model lacks.
func (m *Model) validateTarget(typ, relation string) error {
	if !m.HasType(typ) {
		return m.Schema.UnknownDefinition(typ)
	}
	if _, ok := m.Relation(typ, relation); !ok {
		return &ir.UnknownRelationError{Definition: typ, Name: relation}
	}
	return nil
}

// validateUser refuses a user whose type, or subject set relation, the model lacks.
func (m *Model) validateUser(s rel.SubjectRef) error {
	if !m.HasType(s.Object.Type) {
		return m.Schema.UnknownDefinition(s.Object.Type)
	}
	if s.Relation != "" {
		if _, ok := m.Relation(s.Object.Type, s.Relation); !ok {
			return &ir.UnknownRelationError{Definition: s.Object.Type, Name: s.Relation}
		}
	}
	return nil
}
