package store

import (
	"errors"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
)

func TestCheckUpdates(t *testing.T) {
	r := rel.Relationship{
		Resource: rel.ObjectRef{Type: "doc", ID: "a"}, Relation: "viewer",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}},
	}
	nameless := r
	nameless.Caveat = &rel.Caveat{}
	var invalid *InvalidUpdateError
	var dup *DuplicateUpdateError
	if err := CheckUpdates([]Update{{Op: 9, Relationship: r}}); !errors.As(err, &invalid) {
		t.Fatalf("unknown op: %v", err)
	}
	if err := CheckUpdates([]Update{{Op: Touch, Relationship: nameless}}); !errors.As(err, &invalid) {
		t.Fatalf("nameless caveat: %v", err)
	}
	if err := CheckUpdates([]Update{{Op: Delete, Relationship: nameless}}); err != nil {
		t.Fatalf("delete ignores the caveat: %v", err)
	}
	if err := CheckUpdates([]Update{{Op: Touch, Relationship: r}, {Op: Delete, Relationship: r}}); !errors.As(err, &dup) {
		t.Fatalf("duplicate: %v", err)
	}
}
