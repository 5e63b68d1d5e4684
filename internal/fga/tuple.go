package fga

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/rel"
)

// OpenFGA's length limits on a tuple's fields.
const (
	maxObjectLen   = 256
	maxUserLen     = 512
	maxRelationLen = 50
)

// ParseObject parses an OpenFGA object, `type:id`.
func ParseObject(s string) (rel.ObjectRef, error) {
	if len(s) > maxObjectLen {
		return rel.ObjectRef{}, fmt.Errorf("object %q is longer than %d bytes", clip(s), maxObjectLen)
	}
	typ, id, ok := strings.Cut(s, ":")
	if !ok || !typeName.MatchString(typ) || !validID(id) {
		return rel.ObjectRef{}, fmt.Errorf("invalid object %q: expected type:id", clip(s))
	}
	if id == rel.Wildcard {
		return rel.ObjectRef{}, fmt.Errorf("invalid object %q: the wildcard is not an object", clip(s))
	}
	return rel.ObjectRef{Type: typ, ID: id}, nil
}

// ParseUser parses an OpenFGA user: `type:id`, `type:*` or `type:id#relation`.
func ParseUser(s string) (rel.SubjectRef, error) {
	if len(s) > maxUserLen {
		return rel.SubjectRef{}, fmt.Errorf("user %q is longer than %d bytes", clip(s), maxUserLen)
	}
	obj, relation, set := strings.Cut(s, "#")
	typ, id, ok := strings.Cut(obj, ":")
	if !ok || !typeName.MatchString(typ) || !validID(id) || set && (!relationName.MatchString(relation) || id == rel.Wildcard) {
		return rel.SubjectRef{}, fmt.Errorf("invalid user %q: expected type:id, type:* or type:id#relation", clip(s))
	}
	return rel.SubjectRef{Object: rel.ObjectRef{Type: typ, ID: id}, Relation: relation}, nil
}

// validID is OpenFGA's object id rule: not empty, valid UTF-8, no whitespace, '#' or
// ':'. NUL is refused too: no store keeps it.
func validID(id string) bool {
	if id == "" || !utf8.ValidString(id) {
		return false
	}
	return !strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || r == '#' || r == ':' || r == 0 })
}

// UserString spells a subject as OpenFGA does.
func UserString(s rel.SubjectRef) string {
	u := s.Object.Type + ":" + s.Object.ID
	if s.Relation != "" {
		u += "#" + s.Relation
	}
	return u
}

// Relationship returns the stored relationship of an OpenFGA tuple, validated
// against the model as OpenFGA's Write validates it: the object's type and the
// relation exist, the relation is assignable directly, and it admits the user's type,
// subject set or wildcard with the tuple's condition. Errors are *Error with
// ErrorCode_invalid_tuple.
func (m *Model) Relationship(tk *openfgav1.TupleKey) (rel.Relationship, error) {
	r, err := parseTuple(tk)
	if err != nil {
		return rel.Relationship{}, err
	}
	direct, ok := m.Relation(r.Resource.Type, tk.GetRelation())
	switch {
	case !m.HasType(r.Resource.Type):
		return rel.Relationship{}, tupleError(tk, "type %q not found", r.Resource.Type)
	case !ok:
		return rel.Relationship{}, tupleError(tk, "relation '%s#%s' not found", r.Resource.Type, tk.GetRelation())
	case len(direct) == 0:
		return rel.Relationship{}, tupleError(tk, "relation '%s#%s' is not assignable directly", r.Resource.Type, tk.GetRelation())
	}
	if r.Subject.Relation != "" {
		if _, ok := m.Relation(r.Subject.Object.Type, r.Subject.Relation); !ok {
			return rel.Relationship{}, tupleError(tk, "relation '%s#%s' not found", r.Subject.Object.Type, r.Subject.Relation)
		}
	}
	if !typeAllowed(direct, r.Subject) {
		return rel.Relationship{}, tupleError(tk, "type '%s' is not an allowed type restriction for '%s#%s'", restrictionOf(r.Subject), r.Resource.Type, tk.GetRelation())
	}
	if err := m.conditionError(direct, r); err != nil {
		return rel.Relationship{}, tupleError(tk, "%v", err)
	}
	return r, nil
}

// parseTuple converts a tuple without the model: its relation becomes the stored one.
func parseTuple(tk *openfgav1.TupleKey) (rel.Relationship, error) {
	obj, err := ParseObject(tk.GetObject())
	if err != nil {
		return rel.Relationship{}, tupleError(tk, "%v", err)
	}
	user, err := ParseUser(tk.GetUser())
	if err != nil {
		return rel.Relationship{}, tupleError(tk, "%v", err)
	}
	if len(tk.GetRelation()) > maxRelationLen || !relationName.MatchString(tk.GetRelation()) {
		return rel.Relationship{}, tupleError(tk, "invalid relation %q", clip(tk.GetRelation()))
	}
	r := rel.Relationship{Resource: obj, Relation: StoredRelation(tk.GetRelation()), Subject: user}
	if c := tk.GetCondition(); c != nil {
		if c.GetName() == "" {
			return rel.Relationship{}, tupleError(tk, "condition name is empty")
		}
		r.Caveat = &rel.Caveat{Name: c.GetName(), Context: c.GetContext().AsMap()}
	}
	return r, nil
}

// TupleKey returns the OpenFGA tuple of a stored relationship. It needs no model, so
// that Read and ReadChanges work whatever the model.
func TupleKey(r rel.Relationship) *openfgav1.TupleKey {
	relation, _ := relationOf(r.Relation)
	tk := &openfgav1.TupleKey{Object: r.Resource.Type + ":" + r.Resource.ID, Relation: relation, User: UserString(r.Subject)}
	if r.Caveat != nil {
		tk.Condition = &openfgav1.RelationshipCondition{Name: r.Caveat.Name}
		if len(r.Caveat.Context) > 0 {
			// A stored context came from a Struct, so it converts back.
			tk.Condition.Context, _ = structpb.NewStruct(r.Caveat.Context)
		}
	}
	return tk
}

// Admits reports whether the model admits a stored tuple as OpenFGA's reads do: its
// type has the relation, assignable directly, a type restriction allows its user, and
// its condition (or its lack of one) is one the restrictions allow, with a context of
// that condition's parameters. Tuples a later model no longer admits are ignored by
// evaluation, not refused.
func (m *Model) Admits(r rel.Relationship) bool {
	relation, ok := relationOf(r.Relation)
	if !ok {
		return false
	}
	direct, _ := m.Relation(r.Resource.Type, relation)
	return typeAllowed(direct, r.Subject) && m.conditionError(direct, r) == nil
}

// typeAllowed reports whether a type restriction allows the user: `user` an object
// of its type, `user:*` its wildcard, `group#member` that subject set, whatever the
// restriction's condition.
func typeAllowed(direct []*openfgav1.RelationReference, s rel.SubjectRef) bool {
	wildcard := s.Object.ID == rel.Wildcard
	for _, ref := range direct {
		if ref.GetType() != s.Object.Type {
			continue
		}
		switch {
		case ref.GetWildcard() != nil:
			if wildcard {
				return true
			}
		case !wildcard && ref.GetRelation() == s.Relation:
			return true
		}
	}
	return false
}

// conditionError checks a tuple's condition as OpenFGA does, apart from its type
// restriction: without one, a restriction without a condition must allow the user;
// with one, a restriction of the user's type must name it, and its context may hold
// only the condition's parameters, of their types.
func (m *Model) conditionError(direct []*openfgav1.RelationReference, r rel.Relationship) error {
	if r.Caveat == nil {
		for _, ref := range direct {
			if ref.GetCondition() == "" && typeAllowed([]*openfgav1.RelationReference{ref}, r.Subject) {
				return nil
			}
		}
		return errors.New("condition is missing")
	}
	c := m.Schema.Caveat(r.Caveat.Name)
	if c == nil {
		return fmt.Errorf("undefined condition %q", r.Caveat.Name)
	}
	if !slices.ContainsFunc(direct, func(ref *openfgav1.RelationReference) bool {
		return ref.GetType() == r.Subject.Object.Type && ref.GetCondition() == r.Caveat.Name
	}) {
		return fmt.Errorf("invalid condition %q for type restriction", r.Caveat.Name)
	}
	for k := range r.Caveat.Context {
		if !slices.ContainsFunc(c.Params, func(p caveat.Param) bool { return p.Name == k }) {
			return fmt.Errorf("found invalid context parameter: %s", k)
		}
	}
	if _, err := c.Compiled.ConvertContext(r.Caveat.Context); err != nil {
		return fmt.Errorf("condition context: %w", err)
	}
	return nil
}

// restrictionOf spells the type restriction a subject needs.
func restrictionOf(s rel.SubjectRef) string {
	out := s.Object.Type
	switch {
	case s.Object.ID == rel.Wildcard:
		out += ":*"
	case s.Relation != "":
		out += "#" + s.Relation
	}
	return out
}

// clip shortens very long values in error messages.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
