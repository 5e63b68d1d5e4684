package store

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latch-authz/latch/internal/rel"
)

// Matches reports whether r is selected by f at time now. Every backend must agree
// with it; backends use it directly where an index does not already decide a field.
func (f Filter) Matches(r rel.Relationship, now time.Time) bool {
	if !f.IncludeExpired && r.ExpiredAt(now) {
		return false
	}
	if f.ResourceType != "" && r.Resource.Type != f.ResourceType {
		return false
	}
	if len(f.ResourceIDs) > 0 && !slices.Contains(f.ResourceIDs, r.Resource.ID) {
		return false
	}
	if !strings.HasPrefix(r.Resource.ID, f.ResourceIDPrefix) {
		return false
	}
	if f.Relation != "" && r.Relation != f.Relation {
		return false
	}
	return f.Subject == nil || f.Subject.Matches(r.Subject)
}

// Matches reports whether s is selected by sf.
func (sf SubjectFilter) Matches(s rel.SubjectRef) bool {
	if sf.Type != "" && s.Object.Type != sf.Type {
		return false
	}
	if len(sf.IDs) > 0 && !slices.Contains(sf.IDs, s.Object.ID) {
		return false
	}
	return !sf.RelationSet || s.Relation == sf.Relation
}

// CompareKeys orders relationship keys the way every Query yields them: by resource
// type, resource id, relation, subject type, subject id, subject relation, comparing
// strings bytewise.
func CompareKeys(a, b rel.Key) int {
	if c := cmp.Compare(a.ResourceType, b.ResourceType); c != 0 {
		return c
	}
	if c := cmp.Compare(a.ResourceID, b.ResourceID); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Relation, b.Relation); c != 0 {
		return c
	}
	if c := cmp.Compare(a.SubjectType, b.SubjectType); c != 0 {
		return c
	}
	if c := cmp.Compare(a.SubjectID, b.SubjectID); c != 0 {
		return c
	}
	return cmp.Compare(a.SubjectRelation, b.SubjectRelation)
}

// formatFilter renders f as space-separated field=value pairs, naming only the fields
// that narrow the selection, so an error message shows exactly what was asked for.
func formatFilter(f Filter) string {
	var parts []string
	add := func(name, value string) {
		if value != "" {
			parts = append(parts, name+"="+strconv.Quote(value))
		}
	}
	addIDs := func(name string, ids []string) {
		if len(ids) == 0 {
			return
		}
		quoted := make([]string, len(ids))
		for i, id := range ids {
			quoted[i] = strconv.Quote(id)
		}
		parts = append(parts, name+"=["+strings.Join(quoted, " ")+"]")
	}
	add("resource_type", f.ResourceType)
	addIDs("resource_ids", f.ResourceIDs)
	add("resource_id_prefix", f.ResourceIDPrefix)
	add("relation", f.Relation)
	if s := f.Subject; s != nil {
		add("subject_type", s.Type)
		addIDs("subject_ids", s.IDs)
		if s.RelationSet {
			r := s.Relation
			if r == "" {
				r = "..."
			}
			parts = append(parts, "subject_relation="+strconv.Quote(r))
		}
	}
	if f.IncludeExpired {
		parts = append(parts, "include_expired=true")
	}
	if len(parts) == 0 {
		return "{all relationships}"
	}
	return "{" + strings.Join(parts, " ") + "}"
}
