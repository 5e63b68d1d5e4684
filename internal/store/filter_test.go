package store

import (
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
)

func TestFilterString(t *testing.T) {
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{Filter{}, "{all relationships}"},
		{
			Filter{ResourceType: "document", ResourceIDs: []string{"a", "b c"}, Relation: "viewer"},
			`{resource_type="document" resource_ids=["a" "b c"] relation="viewer"}`,
		},
		{
			Filter{ResourceIDPrefix: "doc-", Subject: &SubjectFilter{Type: "user", IDs: []string{"*"}, RelationSet: true}, IncludeExpired: true},
			`{resource_id_prefix="doc-" subject_type="user" subject_ids=["*"] subject_relation="..." include_expired=true}`,
		},
		{
			Filter{Subject: &SubjectFilter{Type: "group", Relation: "member", RelationSet: true}},
			`{subject_type="group" subject_relation="member"}`,
		},
	} {
		if got := c.f.String(); got != c.want {
			t.Errorf("String() = %s, want %s", got, c.want)
		}
	}
}

func TestFilterMatches(t *testing.T) {
	now := time.Now()
	past := now.Add(-time.Second)
	r := rel.Relationship{
		Resource: rel.ObjectRef{Type: "document", ID: "readme"}, Relation: "viewer",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: "eng"}, Relation: "member"},
	}
	expired := r
	expired.Expiration = &past
	for _, c := range []struct {
		f    Filter
		r    rel.Relationship
		want bool
	}{
		{Filter{}, r, true},
		{Filter{}, expired, false},
		{Filter{IncludeExpired: true}, expired, true},
		{Filter{ResourceType: "document", ResourceIDs: []string{"x", "readme"}, Relation: "viewer"}, r, true},
		{Filter{ResourceType: "folder"}, r, false},
		{Filter{ResourceIDs: []string{"x"}}, r, false},
		{Filter{ResourceIDPrefix: "read"}, r, true},
		{Filter{ResourceIDPrefix: "me"}, r, false},
		{Filter{Relation: "owner"}, r, false},
		{Filter{Subject: &SubjectFilter{Type: "group", IDs: []string{"eng"}}}, r, true},
		{Filter{Subject: &SubjectFilter{Type: "user"}}, r, false},
		{Filter{Subject: &SubjectFilter{IDs: []string{"ops"}}}, r, false},
		{Filter{Subject: &SubjectFilter{Relation: "member", RelationSet: true}}, r, true},
		{Filter{Subject: &SubjectFilter{RelationSet: true}}, r, false},
	} {
		if got := c.f.Matches(c.r, now); got != c.want {
			t.Errorf("%s matches %+v: %v, want %v", c.f, c.r, got, c.want)
		}
	}
}

func TestCompareKeys(t *testing.T) {
	ordered := []rel.Key{
		{ResourceType: "a", ResourceID: "z"},
		{ResourceType: "b", ResourceID: "B"},
		{ResourceType: "b", ResourceID: "a"},
		{ResourceType: "b", ResourceID: "a", Relation: "r", SubjectType: "group", SubjectID: "g"},
		{ResourceType: "b", ResourceID: "a", Relation: "r", SubjectType: "group", SubjectID: "g", SubjectRelation: "member"},
		{ResourceType: "b", ResourceID: "a", Relation: "r", SubjectType: "user", SubjectID: "a"},
	}
	for i := range ordered {
		for j := range ordered {
			got := CompareKeys(ordered[i], ordered[j])
			if want := cmpInt(i, j); got != want {
				t.Fatalf("CompareKeys(%v, %v) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
