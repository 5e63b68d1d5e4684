package server

import (
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/rel"
)

// Checks are most of the traffic, and evaluating their buf.validate rules through
// protovalidate's reflection and regular expressions cost an eighth of a check's CPU
// (and a quarter of a bulk import's). knownValid answers, for the check requests and
// the import stream's messages, whether a message certainly passes those rules, with
// the same rules written out by hand (rel's name and id checks are the proto
// patterns). A request it is unsure of goes through protovalidate, which then also
// words any violation exactly as SpiceDB does.
func knownValid(m any) bool {
	switch r := m.(type) {
	case *v1.CheckPermissionRequest:
		return validConsistency(r.Consistency) && validObject(r.Resource) && validRelation(r.Permission) && validSubject(r.Subject)
	case *v1.CheckBulkPermissionsRequest:
		if !validConsistency(r.Consistency) {
			return false
		}
		for _, it := range r.Items {
			if it == nil || !validObject(it.Resource) || !validRelation(it.Permission) || !validSubject(it.Subject) {
				return false
			}
		}
		return true
	case *v1.ImportBulkRelationshipsRequest:
		for _, x := range r.Relationships {
			if !validRelationship(x) {
				return false
			}
		}
		return true
	}
	return false
}

// validRelationship: a resource, a relation name, a subject, and no caveat (a caveat's
// rules are left to protovalidate).
func validRelationship(x *v1.Relationship) bool {
	return x != nil && x.OptionalCaveat == nil && validObject(x.Resource) && rel.ValidateRelationName(x.Relation) == nil && validSubject(x.Subject)
}

// validConsistency: absent, or exactly one requirement, its flag true or its token
// not empty.
func validConsistency(c *v1.Consistency) bool {
	if c == nil {
		return true
	}
	switch r := c.Requirement.(type) {
	case *v1.Consistency_MinimizeLatency:
		return r.MinimizeLatency
	case *v1.Consistency_FullyConsistent:
		return r.FullyConsistent
	case *v1.Consistency_AtLeastAsFresh:
		return r.AtLeastAsFresh != nil && r.AtLeastAsFresh.Token != ""
	case *v1.Consistency_AtExactSnapshot:
		return r.AtExactSnapshot != nil && r.AtExactSnapshot.Token != ""
	}
	return false
}

// validObject: present, a type matching the type pattern in at most 128 bytes, and an
// id matching the id pattern (the wildcard included) in at most 1024.
func validObject(o *v1.ObjectReference) bool {
	return o != nil && rel.ValidateType(o.ObjectType) == nil && rel.ValidateSubjectID(o.ObjectId) == nil
}

// validRelation: empty, or a name of 3 to 64 bytes matching the relation pattern.
func validRelation(name string) bool {
	return name == "" || rel.ValidateRelationName(name) == nil
}

func validSubject(s *v1.SubjectReference) bool {
	return s != nil && validObject(s.Object) && validRelation(s.OptionalRelation)
}
