package fga

import (
	"context"
	"slices"
	"testing"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/pebble"
)

// OpenFGA's id alphabet (anything but whitespace, '#' and ':') and the stored
// relation names ("viewer#this") go through the default store and come back whole.
func TestPebbleKeepsOpenFGANamesWhole(t *testing.T) {
	ctx := context.Background()
	s, err := pebble.Open(t.TempDir(), pebble.Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := mustModel(t, docModel)
	tuples := []*openfgav1.TupleKey{
		{Object: "document:Ünïcödé/ü.x@y|z*", Relation: "viewer", User: "user:anne@example.com"},
		{Object: "document:a.b-c_d", Relation: "parent", User: "folder:🙂"},
		{Object: "group:eng", Relation: "member", User: "group:x.y@z#member"},
	}
	var updates []store.Update
	for _, tk := range tuples {
		x, err := m.Relationship(tk)
		if err != nil {
			t.Fatal(err)
		}
		updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
	}
	rev, err := s.Write(ctx, nil, updates, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Reader(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for item, err := range r.Query(ctx, store.Filter{}, store.QueryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		tk := TupleKey(item.Relationship)
		got = append(got, tk.GetObject()+"#"+tk.GetRelation()+"@"+tk.GetUser())
	}
	var want []string
	for _, tk := range tuples {
		want = append(want, tk.GetObject()+"#"+tk.GetRelation()+"@"+tk.GetUser())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}
	for item, err := range r.Query(ctx, store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: []string{"anne@example.com"}}}, store.QueryOptions{}) {
		if err != nil || item.Relationship.Resource != (rel.ObjectRef{Type: "document", ID: "Ünïcödé/ü.x@y|z*"}) {
			t.Errorf("reverse read: %v, %v", item.Relationship, err)
		}
	}
}
