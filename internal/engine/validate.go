package engine

import (
	"errors"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// Requests that name types or relations the schema lacks are refused, as SpiceDB
// refuses them, rather than answered NO. Every entry point validates here.

// resolve returns the relation or permission named on definition typ.
func resolve(s *ir.Schema, typ, name string) (*ir.Relation, error) {
	def := s.Definition(typ)
	if def == nil {
		return nil, s.UnknownDefinition(typ)
	}
	rl := def.Relation(name)
	if rl == nil {
		return nil, &ir.UnknownRelationError{Definition: def.Name, Name: name}
	}
	return rl, nil
}

// validateSubjectType refuses a subject type, or subject relation, the schema lacks.
func validateSubjectType(s *ir.Schema, typ, relation string) error {
	sdef := s.Definition(typ)
	if sdef == nil {
		return s.UnknownDefinition(typ)
	}
	if relation != "" && sdef.Relation(relation) == nil {
		return &ir.UnknownRelationError{Definition: sdef.Name, Name: relation}
	}
	return nil
}

// validateSubject also refuses a wildcard, a check or lookup being asked for one
// subject, unless under OpenFGA's semantics, where `type:*` is a subject of its own.
func validateSubject(s *ir.Schema, subj rel.SubjectRef, sem Semantics) error {
	if err := validateSubjectType(s, subj.Object.Type, subj.Relation); err != nil {
		return err
	}
	if subj.Object.ID == rel.Wildcard && sem != OpenFGA {
		return ErrWildcardSubject
	}
	return nil
}

func validateCheck(s *ir.Schema, req CheckRequest, sem Semantics) error {
	if _, err := resolve(s, req.Resource.Type, req.Permission); err != nil {
		return err
	}
	return validateSubject(s, req.Subject, sem)
}

// resourcesTarget validates a lookup of resources and returns the permission it asks.
func resourcesTarget(s *ir.Schema, req LookupResourcesRequest, sem Semantics) (*ir.Relation, error) {
	target, err := resolve(s, req.ResourceType, req.Permission)
	if err != nil {
		return nil, err
	}
	if err := validateSubject(s, req.Subject, sem); err != nil {
		if errors.Is(err, ErrWildcardSubject) {
			return nil, errWildcardLookup
		}
		return nil, err
	}
	return target, nil
}

// subjectsTarget validates a lookup of subjects and returns the permission it asks.
func subjectsTarget(s *ir.Schema, req LookupSubjectsRequest) (*ir.Relation, error) {
	target, err := resolve(s, req.Resource.Type, req.Permission)
	if err != nil {
		return nil, err
	}
	return target, validateSubjectType(s, req.SubjectType, req.SubjectRelation)
}
