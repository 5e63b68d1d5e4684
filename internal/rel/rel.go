// Package rel owns relationship values: objects, subjects, relationships, their string
// syntax (`type:id#relation@type:id[#relation][caveat:{json}][expiration:RFC3339]`) and
// SpiceDB's validation rules for type names, relation names and object ids.
package rel

import "time"

// Wildcard is the object id that stands for every object of a type (`user:*`).
const Wildcard = "*"

// ObjectRef names one object: `document:readme`.
type ObjectRef struct {
	Type string
	ID   string
}

// SubjectRef names a subject: an object, or a subject set when Relation is not empty
// (`group:eng#member`). An empty Relation is SpiceDB's ellipsis: the object itself.
type SubjectRef struct {
	Object   ObjectRef
	Relation string
}

// Caveat is a named caveat with the context stored on a relationship.
type Caveat struct {
	Name    string
	Context map[string]any
}

// Relationship is one stored edge of the graph.
type Relationship struct {
	Resource   ObjectRef
	Relation   string
	Subject    SubjectRef
	Caveat     *Caveat    // nil when the relationship is not caveated
	Expiration *time.Time // nil when the relationship does not expire
}

// Key identifies a relationship regardless of its caveat and expiration: two
// relationships with equal keys are the same relationship.
type Key struct {
	ResourceType, ResourceID, Relation      string
	SubjectType, SubjectID, SubjectRelation string
}

// Key returns r's identity.
func (r Relationship) Key() Key {
	return Key{r.Resource.Type, r.Resource.ID, r.Relation, r.Subject.Object.Type, r.Subject.Object.ID, r.Subject.Relation}
}

// ExpiredAt reports whether r has expired at t (an expiration at or before t).
func (r Relationship) ExpiredAt(t time.Time) bool {
	return r.Expiration != nil && !r.Expiration.After(t)
}
