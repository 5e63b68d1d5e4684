package memory

import (
	"fmt"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// TestReadsTouchOnlyTheSubjectKind holds that a read of a group's members of one
// subject type (and relation) reads those records only, however many members of other
// kinds the group has: a check's read of a group's nested groups must not walk its
// users.
func TestReadsTouchOnlyTheSubjectKind(t *testing.T) {
	s, _ := newTestStore(t, time.Hour)
	var rs []rel.Relationship
	for i := range 1000 {
		rs = append(rs, relationship("group", "top", "member", "user", fmt.Sprintf("u%04d", i), ""))
	}
	for i := range 10 {
		rs = append(rs, relationship("group", "top", "member", "group", fmt.Sprintf("g%02d", i), "member"))
	}
	for i := range 5 {
		rs = append(rs, relationship("group", "top", "member", "group", fmt.Sprintf("h%02d", i), ""))
	}
	rev := mustWrite(t, s, store.Create, rs...)
	sets := &store.SubjectFilter{Type: "group", Relation: "member", RelationSet: true}
	for _, c := range []struct {
		name string
		f    store.Filter
		want int
	}{
		{"subject sets of a listed group", store.Filter{ResourceType: "group", ResourceIDs: []string{"top"}, Relation: "member", Subject: sets}, 10},
		{"subject sets, scanning the type", store.Filter{ResourceType: "group", Relation: "member", Subject: sets}, 10},
		{"any relation of one subject type", store.Filter{ResourceType: "group", ResourceIDs: []string{"top"}, Subject: &store.SubjectFilter{Type: "group"}}, 15},
		{"users", store.Filter{ResourceType: "group", ResourceIDs: []string{"top"}, Relation: "member", Subject: &store.SubjectFilter{Type: "user"}}, 1000},
		{"everything", store.Filter{ResourceType: "group", ResourceIDs: []string{"top"}}, 1015},
	} {
		before := s.Stats().Visited
		got := readAll(t, s, rev, c.f)
		read := s.Stats().Visited - before
		if len(got) != c.want || read != int64(c.want) {
			t.Errorf("%s: %d relationships from %d records read, want %d from as many", c.name, len(got), read, c.want)
		}
	}
	checkInvariants(t, s)
}
