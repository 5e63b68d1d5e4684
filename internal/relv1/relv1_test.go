package relv1

import (
	"reflect"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/rel"
)

func TestRelationshipRoundTrip(t *testing.T) {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, r := range []rel.Relationship{
		{Resource: rel.ObjectRef{Type: "doc", ID: "1"}, Relation: "viewer", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "a"}}},
		{
			Resource: rel.ObjectRef{Type: "doc", ID: "1"}, Relation: "viewer",
			Subject:    rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: "g"}, Relation: "member"},
			Caveat:     &rel.Caveat{Name: "ip", Context: map[string]any{"n": 1.5, "s": "x"}},
			Expiration: &exp,
		},
	} {
		wire, err := Relationship(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := FromRelationship(wire); !reflect.DeepEqual(got, r) {
			t.Errorf("round trip of %s gave %s", rel.String(r), rel.String(got))
		}
	}
}

func TestEmptyContextIsNone(t *testing.T) {
	r := rel.Relationship{
		Resource: rel.ObjectRef{Type: "doc", ID: "1"}, Relation: "viewer",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "a"}},
		Caveat:  &rel.Caveat{Name: "c", Context: map[string]any{}},
	}
	wire, err := Relationship(r)
	if err != nil {
		t.Fatal(err)
	}
	if wire.GetOptionalCaveat().GetContext() != nil {
		t.Errorf("an empty context went on the wire as %v; want none", wire.GetOptionalCaveat().GetContext())
	}
	if got := FromRelationship(wire); got.Caveat == nil || got.Caveat.Context != nil {
		t.Errorf("read back caveat %+v; want the caveat with no context", got.Caveat)
	}
}

func TestBadContextFails(t *testing.T) {
	r := rel.Relationship{Caveat: &rel.Caveat{Name: "c", Context: map[string]any{"f": func() {}}}}
	if _, err := Relationship(r); err == nil {
		t.Error("a context with a function converted; want an error")
	}
}

func TestNilMessagesReadAsZero(t *testing.T) {
	if got := FromRelationship(&v1.Relationship{}); !reflect.DeepEqual(got, rel.Relationship{}) {
		t.Errorf("empty relationship read as %+v", got)
	}
	if got := FromRelationship(&v1.Relationship{OptionalCaveat: &v1.ContextualizedCaveat{}}); got.Caveat != nil {
		t.Errorf("a caveat without a name read as %+v; want none", got.Caveat)
	}
}
