// Package relv1 converts between latch's relationship values (internal/rel) and the
// authzed.api.v1 protos, in both directions, so that the server and the CLI put the
// same relationship on the wire the same way. Functions named for a value produce the
// proto; those named From… read one. Nil sub-messages read as zero values, never a
// panic: callers validate shapes themselves (the server with the generated Validate).
package relv1

import (
	"fmt"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latch-authz/latch/internal/rel"
)

// Object is o on the wire.
func Object(o rel.ObjectRef) *v1.ObjectReference {
	return &v1.ObjectReference{ObjectType: o.Type, ObjectId: o.ID}
}

// Subject is s on the wire.
func Subject(s rel.SubjectRef) *v1.SubjectReference {
	return &v1.SubjectReference{Object: Object(s.Object), OptionalRelation: s.Relation}
}

// FromObject reads an object reference.
func FromObject(o *v1.ObjectReference) rel.ObjectRef {
	return rel.ObjectRef{Type: o.GetObjectType(), ID: o.GetObjectId()}
}

// FromSubject reads a subject reference.
func FromSubject(s *v1.SubjectReference) rel.SubjectRef {
	return rel.SubjectRef{Object: FromObject(s.GetObject()), Relation: s.GetOptionalRelation()}
}

// Context is a caveat context on the wire; nil and empty contexts are sent as none.
// Only values JSON could not have produced (channels, functions, ...) fail.
func Context(ctx map[string]any) (*structpb.Struct, error) {
	if len(ctx) == 0 {
		return nil, nil
	}
	return structpb.NewStruct(ctx)
}

// FromContext reads a caveat context as plain Go values (numbers become float64, as
// JSON's do); an empty one reads as nil.
func FromContext(s *structpb.Struct) map[string]any {
	if s == nil || len(s.GetFields()) == 0 {
		return nil
	}
	return s.AsMap()
}

// Relationship is r on the wire; it fails only when the caveat context does (see
// Context).
func Relationship(r rel.Relationship) (*v1.Relationship, error) {
	out := &v1.Relationship{
		Resource: Object(r.Resource),
		Relation: r.Relation,
		Subject:  Subject(r.Subject),
	}
	if r.Caveat != nil {
		ctx, err := Context(r.Caveat.Context)
		if err != nil {
			return nil, fmt.Errorf("caveat context of %s: %w", rel.String(r), err)
		}
		out.OptionalCaveat = &v1.ContextualizedCaveat{CaveatName: r.Caveat.Name, Context: ctx}
	}
	if r.Expiration != nil {
		out.OptionalExpiresAt = timestamppb.New(*r.Expiration)
	}
	return out, nil
}

// FromRelationship reads a relationship. A caveat without a name is no caveat.
func FromRelationship(r *v1.Relationship) rel.Relationship {
	out := rel.Relationship{
		Resource: FromObject(r.GetResource()),
		Relation: r.GetRelation(),
		Subject:  FromSubject(r.GetSubject()),
	}
	if c := r.GetOptionalCaveat(); c != nil && c.GetCaveatName() != "" {
		out.Caveat = &rel.Caveat{Name: c.GetCaveatName(), Context: FromContext(c.GetContext())}
	}
	if e := r.GetOptionalExpiresAt(); e != nil {
		t := e.AsTime()
		out.Expiration = &t
	}
	return out
}
