package ir_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
)

const validateSchema = `use expiration
caveat on_weekday(day string) { day != "sunday" }
caveat other(n int) { n > 1 }
definition user {}
definition team { relation member: user }
definition document {
	relation viewer: user | team#member | user:* with on_weekday
	relation editor: user with on_weekday | user with other
	relation expiring: user with expiration | team#member with on_weekday and expiration
	permission view = viewer + editor
}`

func mustCompile(t *testing.T) *ir.Schema {
	t.Helper()
	s, err := schema.Compile(validateSchema)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func relationship(resource, relation, subject string) rel.Relationship {
	r := rel.Relationship{Resource: rel.ObjectRef{Type: "document", ID: "readme"}, Relation: relation}
	if resource != "" {
		r.Resource.Type = resource
	}
	r.Subject.Object = rel.ObjectRef{Type: subject, ID: "alice"}
	return r
}

func TestValidateRelationship(t *testing.T) {
	s := mustCompile(t)
	expires := time.Now().Add(time.Hour)
	withCaveat := func(r rel.Relationship, name string, ctx map[string]any) rel.Relationship {
		r.Caveat = &rel.Caveat{Name: name, Context: ctx}
		return r
	}
	withSubjectRel := func(r rel.Relationship, relation string) rel.Relationship {
		r.Subject.Relation = relation
		return r
	}
	wildcard := func(r rel.Relationship) rel.Relationship {
		r.Subject.Object.ID = rel.Wildcard
		return r
	}
	expiring := func(r rel.Relationship) rel.Relationship {
		r.Expiration = &expires
		return r
	}
	tests := []struct {
		name    string
		r       rel.Relationship
		wantErr error // nil for accepted; otherwise a value of the expected type
		msg     string
	}{
		{"plain", relationship("", "viewer", "user"), nil, ""},
		{"subject set", withSubjectRel(relationship("", "viewer", "team"), "member"), nil, ""},
		{"caveated wildcard", withCaveat(wildcard(relationship("", "viewer", "user")), "on_weekday", map[string]any{"day": "monday"}), nil, ""},
		{"either caveat", withCaveat(relationship("", "editor", "user"), "other", nil), nil, ""},
		{"expiring", expiring(relationship("", "expiring", "user")), nil, ""},
		{"expiring caveated subject set", expiring(withCaveat(withSubjectRel(relationship("", "expiring", "team"), "member"), "on_weekday", nil)), nil, ""},

		{
			"unknown resource type", relationship("folder", "viewer", "user"), &ir.UnknownDefinitionError{},
			"object definition `folder` not found",
		},
		{
			"unknown relation", relationship("", "owner", "user"), &ir.UnknownRelationError{},
			"relation/permission `owner` not found under definition `document`",
		},
		{
			"unknown subject type", relationship("", "viewer", "robot"), &ir.UnknownDefinitionError{},
			"object definition `robot` not found",
		},
		{
			"unknown subject relation", withSubjectRel(relationship("", "viewer", "team"), "lead"), &ir.UnknownRelationError{},
			"relation/permission `lead` not found under definition `team`",
		},
		{
			"write to permission", relationship("", "view", "user"), &ir.CannotWritePermissionError{},
			"cannot write a relationship to permission `view` under definition `document`",
		},
		{
			"unknown caveat", withCaveat(relationship("", "viewer", "user"), "nope", nil), &ir.UnknownCaveatError{},
			"subjects of type `user with nope` are not allowed on relation `document#viewer`: caveat `nope` is not defined",
		},
		{
			"subject type not allowed", relationship("", "viewer", "team"), &ir.SubjectNotAllowedError{},
			"subjects of type `team` are not allowed on relation `document#viewer`",
		},
		{
			"subject relation not allowed", withSubjectRel(relationship("", "editor", "team"), "member"), &ir.SubjectNotAllowedError{},
			"subjects of type `team#member` are not allowed on relation `document#editor`",
		},
		{
			"wildcard not allowed", wildcard(relationship("", "editor", "user")), &ir.WildcardNotAllowedError{},
			"subjects of type `user:*` are not allowed on relation `document#editor`: the relation does not allow wildcard subjects",
		},
		{
			"caveat required", relationship("", "editor", "user"), &ir.CaveatRequiredError{},
			"subjects of type `user` are not allowed on relation `document#editor` without one of the following caveats: on_weekday,other",
		},
		{
			"wildcard caveat required", wildcard(relationship("", "viewer", "user")), &ir.CaveatRequiredError{},
			"subjects of type `user:*` are not allowed on relation `document#viewer` without one of the following caveats: on_weekday",
		},
		{
			"caveat not allowed", withCaveat(relationship("", "viewer", "user"), "other", nil), &ir.SubjectNotAllowedError{},
			"subjects of type `user with other` are not allowed on relation `document#viewer`",
		},
		{
			"expiration not allowed", expiring(relationship("", "viewer", "user")), &ir.SubjectNotAllowedError{},
			"subjects of type `user with expiration` are not allowed on relation `document#viewer`",
		},
		{
			"expiration required", relationship("", "expiring", "user"), &ir.SubjectNotAllowedError{},
			"subjects of type `user` are not allowed on relation `document#expiring`",
		},
		{"caveat context bad", withCaveat(wildcard(relationship("", "viewer", "user")), "on_weekday", map[string]any{"nope": 1}), &ir.CaveatContextError{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.ValidateRelationship(tt.r)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted; want an error")
			}
			if !sameType(err, tt.wantErr) {
				t.Fatalf("error %T (%v), want %T", err, err, tt.wantErr)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("message = %q\nwant      %q", err.Error(), tt.msg)
			}
		})
	}
}

func sameType(err, want error) bool {
	switch want.(type) {
	case *ir.UnknownDefinitionError:
		var e *ir.UnknownDefinitionError
		return errors.As(err, &e)
	case *ir.UnknownRelationError:
		var e *ir.UnknownRelationError
		return errors.As(err, &e)
	case *ir.CannotWritePermissionError:
		var e *ir.CannotWritePermissionError
		return errors.As(err, &e)
	case *ir.UnknownCaveatError:
		var e *ir.UnknownCaveatError
		return errors.As(err, &e)
	case *ir.SubjectNotAllowedError:
		var e *ir.SubjectNotAllowedError
		return errors.As(err, &e)
	case *ir.WildcardNotAllowedError:
		var e *ir.WildcardNotAllowedError
		return errors.As(err, &e)
	case *ir.CaveatRequiredError:
		var e *ir.CaveatRequiredError
		return errors.As(err, &e)
	case *ir.CaveatContextError:
		var e *ir.CaveatContextError
		return errors.As(err, &e)
	}
	return false
}

func TestValidateErrorFields(t *testing.T) {
	s := mustCompile(t)
	err := s.ValidateRelationship(relationship("", "editor", "user"))
	var cr *ir.CaveatRequiredError
	if !errors.As(err, &cr) || cr.Definition != "document" || cr.Relation != "editor" || cr.SubjectType != "user" || len(cr.Caveats) != 2 {
		t.Errorf("CaveatRequiredError = %+v", cr)
	}
}

func TestAllowsSubject(t *testing.T) {
	s := mustCompile(t)
	user := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "alice"}}
	all := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: rel.Wildcard}}
	members := rel.SubjectRef{Object: rel.ObjectRef{Type: "team", ID: "eng"}, Relation: "member"}
	tests := []struct {
		def, relation string
		subj          rel.SubjectRef
		caveat        string
		expiring      bool
		want          bool
	}{
		{"document", "viewer", user, "", false, true},
		{"document", "viewer", user, "", true, false},
		{"document", "viewer", all, "", false, false},
		{"document", "viewer", all, "on_weekday", false, true},
		{"document", "viewer", members, "", false, true},
		{"document", "expiring", members, "on_weekday", true, true},
		{"document", "expiring", members, "on_weekday", false, false},
		{"document", "view", user, "", false, false},
		{"nothing", "viewer", user, "", false, false},
		{"document", "nothing", user, "", false, false},
	}
	for _, tt := range tests {
		if got := s.AllowsSubject(tt.def, tt.relation, tt.subj, tt.caveat, tt.expiring); got != tt.want {
			t.Errorf("AllowsSubject(%s#%s, %+v, %q, %v) = %v, want %v", tt.def, tt.relation, tt.subj, tt.caveat, tt.expiring, got, tt.want)
		}
	}
}

func TestUnknownDefinitionSaysWhenNoSchema(t *testing.T) {
	empty, err := schema.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	if msg := empty.UnknownDefinition("document").Error(); !strings.Contains(msg, "no schema has been written") {
		t.Errorf("an empty schema's error %q does not say no schema was written", msg)
	}
	withDefs, err := schema.Compile("definition user {}")
	if err != nil {
		t.Fatal(err)
	}
	if msg := withDefs.UnknownDefinition("document").Error(); msg != "object definition `document` not found" {
		t.Errorf("error %q, want SpiceDB's text alone", msg)
	}
}
