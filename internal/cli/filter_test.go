package cli

import (
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"
)

func TestParseFilter(t *testing.T) {
	rf := func(typ, id, relation string, sf *v1.SubjectFilter) *v1.RelationshipFilter {
		return &v1.RelationshipFilter{ResourceType: typ, OptionalResourceId: id, OptionalRelation: relation, OptionalSubjectFilter: sf}
	}
	sf := func(typ, id string, relation *string) *v1.SubjectFilter {
		f := &v1.SubjectFilter{SubjectType: typ, OptionalSubjectId: id}
		if relation != nil {
			f.OptionalRelation = &v1.SubjectFilter_RelationFilter{Relation: *relation}
		}
		return f
	}
	member, ellipsis := "member", ""
	for _, tc := range []struct {
		in   string
		want *v1.RelationshipFilter
	}{
		{"document", rf("document", "", "", nil)},
		{"document:readme", rf("document", "readme", "", nil)},
		{"document#viewer", rf("document", "", "viewer", nil)},
		{"document:readme#viewer", rf("document", "readme", "viewer", nil)},
		{"document:readme#viewer@user", rf("document", "readme", "viewer", sf("user", "", nil))},
		{"document:readme#viewer@user:alice", rf("document", "readme", "viewer", sf("user", "alice", nil))},
		{"document#viewer@group:eng#member", rf("document", "", "viewer", sf("group", "eng", &member))},
		{"document#viewer@group#...", rf("document", "", "viewer", sf("group", "", &ellipsis))},
		{"document@user:*", rf("document", "", "", sf("user", "*", nil))},
		{"@user:alice", rf("", "", "", sf("user", "alice", nil))},
		{"#viewer@user:alice", rf("", "", "viewer", sf("user", "alice", nil))},
		{"tenant/document:a/b_c-d=", rf("tenant/document", "a/b_c-d=", "", nil)},
	} {
		got, err := parseFilter(tc.in)
		if err != nil {
			t.Errorf("parseFilter(%q): %v", tc.in, err)
			continue
		}
		if !proto.Equal(got, tc.want) {
			t.Errorf("parseFilter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseFilterErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"document:", `must be followed by an object id`},
		{":readme", `needs a type`},
		{"document#", `"#" must be followed by a relation`},
		{"document@", `"@" must be followed by a subject type`},
		{"document@:alice", `needs a type`},
		{"document@user#", `followed by a relation or "..."`},
		{"document@user:a@b", `more than one "@"`},
		{"document#a#b", `relation "a#b"`},
		{"document:a:b", `object id "a:b"`},
		{"document viewer", "whitespace"},
	} {
		_, err := parseFilter(tc.in)
		if err == nil {
			t.Errorf("parseFilter(%q) succeeded, want an error mentioning %q", tc.in, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "filter") {
			t.Errorf("parseFilter(%q) = %q, want it to name the filter and mention %q", tc.in, err, tc.want)
		}
	}
}

func TestParseConsistency(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *v1.Consistency
	}{
		{"full", &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}}},
		{"min", &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}}},
		{"at-least:GhUKEzE2=", &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: &v1.ZedToken{Token: "GhUKEzE2="}}}},
		{"exact:a+b/c", &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: &v1.ZedToken{Token: "a+b/c"}}}},
	} {
		got, err := parseConsistency(tc.in)
		if err != nil || !proto.Equal(got, tc.want) {
			t.Errorf("parseConsistency(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "ful", "at-least", "at-least:", "exact:", "full:x", "token"} {
		if _, err := parseConsistency(bad); err == nil {
			t.Errorf("parseConsistency(%q) succeeded", bad)
		}
	}
}
