package cli

import (
	"fmt"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
)

// FilterHelp documents the relationship filter grammar.
const FilterHelp = `A FILTER is a relationship with parts left out:

  FILTER   = [TYPE[:ID]] [#RELATION] [@SUBJECT]
  SUBJECT  = TYPE[:ID][#RELATION]

Every part given must match; parts left out match anything. A subject relation of "..."
matches only subjects that are objects themselves (user:alice, not group:eng#member).

  document                      every relationship of a document
  document:readme               every relationship of document:readme
  document#viewer               every viewer relationship of any document
  document:readme#viewer@user   document:readme's viewers that are users
  document@user:alice           every document relationship with user:alice as subject
  @group:eng#member             every relationship whose subject is group:eng#member
  document#viewer@group#...     document viewers that are groups themselves`

// parseFilter parses FILTER (see FilterHelp) into a ReadRelationships filter. It
// checks only the grammar; the server checks the names against the schema.
func parseFilter(s string) (*v1.RelationshipFilter, error) {
	fail := func(why string) error { return fmt.Errorf("filter %q: %s", s, why) }
	if strings.TrimSpace(s) == "" {
		return nil, fail("empty: give at least a resource type, a relation or a subject")
	}
	if strings.ContainsAny(s, " \t\n") {
		return nil, fail("contains whitespace")
	}
	if strings.Count(s, "@") > 1 {
		return nil, fail(`more than one "@"`)
	}
	resourcePart, subjectPart, hasSubject := strings.Cut(s, "@")
	objectPart, relation, hasRelation := strings.Cut(resourcePart, "#")
	if hasRelation && relation == "" {
		return nil, fail(`"#" must be followed by a relation`)
	}
	if strings.ContainsAny(relation, ":#") {
		return nil, fail(fmt.Sprintf("relation %q holds ':' or '#'", relation))
	}
	typ, id, err := parseFilterObject(objectPart)
	if err != nil {
		return nil, fail(err.Error())
	}
	f := &v1.RelationshipFilter{ResourceType: typ, OptionalResourceId: id, OptionalRelation: relation}
	if !hasSubject {
		return f, nil
	}
	sf, err := parseSubjectFilter(subjectPart)
	if err != nil {
		return nil, fail(err.Error())
	}
	f.OptionalSubjectFilter = sf
	return f, nil
}

// parseFilterObject parses `[TYPE[:ID]]`; an id needs a type.
func parseFilterObject(s string) (typ, id string, err error) {
	typ, id, hasID := strings.Cut(s, ":")
	switch {
	case hasID && typ == "":
		return "", "", fmt.Errorf("object id %q needs a type before the ':'", id)
	case hasID && id == "":
		return "", "", fmt.Errorf(`":" after %q must be followed by an object id`, typ)
	case strings.ContainsAny(id, ":#@"):
		return "", "", fmt.Errorf("object id %q holds one of ':', '#', '@'", id)
	}
	return typ, id, nil
}

// parseSubjectFilter parses `TYPE[:ID][#RELATION]`.
func parseSubjectFilter(s string) (*v1.SubjectFilter, error) {
	objectPart, relation, hasRelation := strings.Cut(s, "#")
	if hasRelation && relation == "" {
		return nil, fmt.Errorf(`"#" in the subject must be followed by a relation or "..."`)
	}
	if strings.ContainsAny(relation, ":#@") {
		return nil, fmt.Errorf("subject relation %q holds ':', '#' or '@'", relation)
	}
	typ, id, err := parseFilterObject(objectPart)
	if err != nil {
		return nil, err
	}
	if typ == "" {
		return nil, fmt.Errorf(`"@" must be followed by a subject type`)
	}
	sf := &v1.SubjectFilter{SubjectType: typ, OptionalSubjectId: id}
	if hasRelation {
		if relation == "..." {
			relation = ""
		}
		sf.OptionalRelation = &v1.SubjectFilter_RelationFilter{Relation: relation}
	}
	return sf, nil
}
