package ir

import (
	"fmt"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/rel"
)

// Write-time validation errors. Each names the gRPC code and ErrorReason SpiceDB
// answers with, so the error table (server/apierr) maps them the same way.

// UnknownDefinitionError: a relationship, request or filter names a type the schema
// does not define.
// SpiceDB: FAILED_PRECONDITION, ERROR_REASON_UNKNOWN_DEFINITION.
type UnknownDefinitionError struct {
	Name string
	// NoSchema: the schema defines nothing at all, the usual cause for a new user.
	NoSchema bool
}

func (e *UnknownDefinitionError) Error() string {
	if e.NoSchema {
		return fmt.Sprintf("object definition `%s` not found: no schema has been written (write one with `latch schema write` or `zed schema write`)", e.Name)
	}
	return fmt.Sprintf("object definition `%s` not found", e.Name)
}

// UnknownDefinition is the error for a name s does not define, saying when s is empty.
func (s *Schema) UnknownDefinition(name string) *UnknownDefinitionError {
	return &UnknownDefinitionError{Name: name, NoSchema: len(s.Definitions) == 0 && len(s.Caveats) == 0}
}

// UnknownRelationError: a relationship, request or filter names a relation or
// permission the definition lacks.
// SpiceDB: FAILED_PRECONDITION, ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION.
type UnknownRelationError struct{ Definition, Name string }

func (e *UnknownRelationError) Error() string {
	return fmt.Sprintf("relation/permission `%s` not found under definition `%s`", e.Name, e.Definition)
}

// CannotWritePermissionError: a relationship's relation is a permission.
// SpiceDB: INVALID_ARGUMENT, ERROR_REASON_CANNOT_UPDATE_PERMISSION.
type CannotWritePermissionError struct{ Definition, Permission string }

func (e *CannotWritePermissionError) Error() string {
	return fmt.Sprintf("cannot write a relationship to permission `%s` under definition `%s`", e.Permission, e.Definition)
}

// UnknownCaveatError: a relationship names a caveat the schema does not define.
// SubjectType is the subject as a type-list entry with that caveat (`user with c`).
// SpiceDB: INVALID_ARGUMENT, ERROR_REASON_INVALID_SUBJECT_TYPE (no relation can
// allow a subject with a caveat that does not exist).
type UnknownCaveatError struct{ Name, Definition, Relation, SubjectType string }

func (e *UnknownCaveatError) Error() string {
	return fmt.Sprintf("subjects of type `%s` are not allowed on relation `%s#%s`: caveat `%s` is not defined", e.SubjectType, e.Definition, e.Relation, e.Name)
}

// SubjectNotAllowedError: the relation's type list has no entry for the subject as
// written (type, subject relation, caveat and expiration must all match).
// SubjectType is the subject rendered as a type-list entry: `team`,
// `group#member`, `user with expiration`.
// SpiceDB: INVALID_ARGUMENT, ERROR_REASON_INVALID_SUBJECT_TYPE.
type SubjectNotAllowedError struct{ Definition, Relation, SubjectType string }

func (e *SubjectNotAllowedError) Error() string {
	return fmt.Sprintf("subjects of type `%s` are not allowed on relation `%s#%s`", e.SubjectType, e.Definition, e.Relation)
}

// WildcardNotAllowedError: a wildcard subject (`user:*`) on a relation whose type list
// has no `user:*`.
// SpiceDB: INVALID_ARGUMENT, ERROR_REASON_INVALID_SUBJECT_TYPE (the reason
// ERROR_REASON_WILDCARD_NOT_ALLOWED is for wildcard subjects in check requests).
type WildcardNotAllowedError struct{ Definition, Relation, SubjectType string }

func (e *WildcardNotAllowedError) Error() string {
	return fmt.Sprintf("subjects of type `%s` are not allowed on relation `%s#%s`: the relation does not allow wildcard subjects", e.SubjectType, e.Definition, e.Relation)
}

// CaveatRequiredError: the subject type is allowed only with a caveat and the
// relationship has none. Caveats lists the caveats the relation accepts for it.
// SpiceDB: INVALID_ARGUMENT, ERROR_REASON_INVALID_SUBJECT_TYPE.
type CaveatRequiredError struct {
	Definition, Relation, SubjectType string
	Caveats                           []string
}

func (e *CaveatRequiredError) Error() string {
	return fmt.Sprintf("subjects of type `%s` are not allowed on relation `%s#%s` without one of the following caveats: %s",
		e.SubjectType, e.Definition, e.Relation, strings.Join(e.Caveats, ","))
}

// CaveatContextError: the context stored with a caveated relationship does not fit
// the caveat's parameters (unknown name or wrong type).
// SpiceDB: INVALID_ARGUMENT, ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR.
type CaveatContextError struct {
	Caveat string
	Err    error
}

func (e *CaveatContextError) Error() string {
	return fmt.Sprintf("invalid context for caveat `%s`: %v", e.Caveat, e.Err)
}

func (e *CaveatContextError) Unwrap() error { return e.Err }

// ValidateRelationship checks a relationship about to be created or touched against
// the schema, in SpiceDB's order: the resource type and relation exist, the subject
// type and subject relation exist, the relation is not a permission, the caveat
// exists, the relation's type list has exactly this subject (type, subject relation
// or wildcard, caveat, expiration), and the caveat context fits the parameters.
// Deletes need only the first two checks.
func (s *Schema) ValidateRelationship(r rel.Relationship) error {
	target, err := s.writableRelation(r)
	if err != nil {
		return err
	}
	caveatName, expiring := "", r.Expiration != nil
	if r.Caveat != nil {
		caveatName = r.Caveat.Name
		if s.Caveat(caveatName) == nil {
			typ := subjectEntry(r.Subject, caveatName, expiring).String()
			return &UnknownCaveatError{Name: caveatName, Definition: target.Def.Name, Relation: target.Name, SubjectType: typ}
		}
	}
	if !target.allows(r.Subject, caveatName, expiring) {
		return s.notAllowed(target, r.Subject, caveatName, expiring)
	}
	if r.Caveat == nil || len(r.Caveat.Context) == 0 {
		return nil
	}
	c := s.Caveat(caveatName)
	for name := range r.Caveat.Context {
		if !slices.ContainsFunc(c.Params, func(p caveat.Param) bool { return p.Name == name }) {
			return &CaveatContextError{Caveat: caveatName, Err: fmt.Errorf("unknown parameter `%s`", name)}
		}
	}
	if c.Compiled != nil {
		if _, err := c.Compiled.ConvertContext(r.Caveat.Context); err != nil {
			return &CaveatContextError{Caveat: caveatName, Err: err}
		}
	}
	return nil
}

// writableRelation resolves the names a relationship uses and returns its relation.
func (s *Schema) writableRelation(r rel.Relationship) (*Relation, error) {
	def := s.Definition(r.Resource.Type)
	if def == nil {
		return nil, s.UnknownDefinition(r.Resource.Type)
	}
	target := def.Relation(r.Relation)
	if target == nil {
		return nil, &UnknownRelationError{Definition: def.Name, Name: r.Relation}
	}
	subj := s.Definition(r.Subject.Object.Type)
	if subj == nil {
		return nil, s.UnknownDefinition(r.Subject.Object.Type)
	}
	if r.Subject.Relation != "" && subj.Relation(r.Subject.Relation) == nil {
		return nil, &UnknownRelationError{Definition: subj.Name, Name: r.Subject.Relation}
	}
	if target.IsPermission() {
		return nil, &CannotWritePermissionError{Definition: def.Name, Permission: target.Name}
	}
	return target, nil
}

// AllowsSubject reports whether relation `relation` of definition def accepts subj
// written with the given caveat ("" for none) and with or without an expiration.
func (s *Schema) AllowsSubject(def, relation string, subj rel.SubjectRef, caveat string, hasExpiration bool) bool {
	d := s.Definition(def)
	if d == nil {
		return false
	}
	r := d.Relation(relation)
	return r != nil && r.allows(subj, caveat, hasExpiration)
}

func (r *Relation) allows(subj rel.SubjectRef, caveat string, expiring bool) bool {
	return r.AllowsType(subjectEntry(subj, caveat, expiring))
}

// AllowsType reports whether r's type list has the entry t.
func (r *Relation) AllowsType(t SubjectType) bool {
	return slices.ContainsFunc(r.Allowed, func(a AllowedSubject) bool { return a.SubjectType == t })
}

// subjectEntry is the type-list entry a subject written this way needs.
func subjectEntry(subj rel.SubjectRef, caveat string, expiring bool) SubjectType {
	a := SubjectType{Type: subj.Object.Type, Relation: subj.Relation, Caveat: caveat, Expiration: expiring}
	if subj.Object.ID == rel.Wildcard {
		a.Wildcard = true
	}
	return a
}

// notAllowed explains why no entry of target's type list matches the subject.
func (s *Schema) notAllowed(target *Relation, subj rel.SubjectRef, caveat string, expiring bool) error {
	want := subjectEntry(subj, caveat, expiring)
	typ := want.String()
	def, name := target.Def.Name, target.Name
	if want.Wildcard && !slices.ContainsFunc(target.Allowed, func(a AllowedSubject) bool { return a.Wildcard && a.Type == want.Type }) {
		return &WildcardNotAllowedError{Definition: def, Relation: name, SubjectType: typ}
	}
	if caveat == "" {
		var caveats []string
		for _, a := range target.Allowed {
			if a.Caveat != "" && a.Type == want.Type && a.Relation == want.Relation && a.Wildcard == want.Wildcard && a.Expiration == expiring {
				caveats = append(caveats, a.Caveat)
			}
		}
		if len(caveats) > 0 {
			return &CaveatRequiredError{Definition: def, Relation: name, SubjectType: typ, Caveats: caveats}
		}
	}
	return &SubjectNotAllowedError{Definition: def, Relation: name, SubjectType: typ}
}

// String renders the entry as schema text: `user`, `user:*`, `group#member`, each with
// ` with caveat`, ` with expiration` or ` with caveat and expiration`.
func (a SubjectType) String() string {
	s := a.Type
	switch {
	case a.Wildcard:
		s += ":*"
	case a.Relation != "":
		s += "#" + a.Relation
	}
	switch {
	case a.Caveat != "" && a.Expiration:
		s += " with " + a.Caveat + " and expiration"
	case a.Caveat != "":
		s += " with " + a.Caveat
	case a.Expiration:
		s += " with expiration"
	}
	return s
}
