package cli

import (
	"fmt"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latch-authz/latch/internal/rel"
)

func objectToV1(o rel.ObjectRef) *v1.ObjectReference {
	return &v1.ObjectReference{ObjectType: o.Type, ObjectId: o.ID}
}

func subjectToV1(s rel.SubjectRef) *v1.SubjectReference {
	return &v1.SubjectReference{Object: objectToV1(s.Object), OptionalRelation: s.Relation}
}

// relToV1 converts a relationship for the wire; only a caveat context that JSON
// could not have produced fails.
func relToV1(r rel.Relationship) (*v1.Relationship, error) {
	out := &v1.Relationship{
		Resource: objectToV1(r.Resource),
		Relation: r.Relation,
		Subject:  subjectToV1(r.Subject),
	}
	if r.Caveat != nil {
		ctx, err := contextToV1(r.Caveat.Context)
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

// contextToV1 converts a caveat context; nil and empty contexts are sent as none.
func contextToV1(ctx map[string]any) (*structpb.Struct, error) {
	if len(ctx) == 0 {
		return nil, nil
	}
	return structpb.NewStruct(ctx)
}

// relFromV1 converts a relationship read from the server.
func relFromV1(r *v1.Relationship) rel.Relationship {
	out := rel.Relationship{
		Resource: rel.ObjectRef{Type: r.GetResource().GetObjectType(), ID: r.GetResource().GetObjectId()},
		Relation: r.GetRelation(),
		Subject:  subjectFromV1(r.GetSubject()),
	}
	if c := r.GetOptionalCaveat(); c != nil {
		out.Caveat = &rel.Caveat{Name: c.GetCaveatName()}
		if c.GetContext() != nil {
			out.Caveat.Context = c.GetContext().AsMap()
		}
	}
	if e := r.GetOptionalExpiresAt(); e != nil {
		t := e.AsTime()
		out.Expiration = &t
	}
	return out
}

func subjectFromV1(s *v1.SubjectReference) rel.SubjectRef {
	return rel.SubjectRef{
		Object:   rel.ObjectRef{Type: s.GetObject().GetObjectType(), ID: s.GetObject().GetObjectId()},
		Relation: s.GetOptionalRelation(),
	}
}

// ConsistencyHelp documents the --consistency values.
const ConsistencyHelp = `consistency of the read: "full" (the newest data), "min" (a recent snapshot the server ` +
	`may serve from cache), "at-least:ZEDTOKEN" (data at least as fresh as a token a write returned) ` +
	`or "exact:ZEDTOKEN" (exactly that snapshot)`

// parseConsistency parses a --consistency value. Zedtokens are base64, which has
// no ':', so the first ':' separates the kind from the token.
func parseConsistency(s string) (*v1.Consistency, error) {
	kind, token, hasToken := strings.Cut(s, ":")
	switch {
	case kind == "full" && !hasToken:
		return &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}}, nil
	case kind == "min" && !hasToken:
		return &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}}, nil
	case kind == "at-least" && token != "":
		return &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: &v1.ZedToken{Token: token}}}, nil
	case kind == "exact" && token != "":
		return &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: &v1.ZedToken{Token: token}}}, nil
	}
	return nil, fmt.Errorf("--consistency %q: expected full, min, at-least:ZEDTOKEN or exact:ZEDTOKEN", s)
}
