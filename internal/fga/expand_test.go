package fga

import (
	"context"
	"testing"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/rel"
)

func TestExpandIsOneLevelDeep(t *testing.T) {
	m := mustModel(t, docModel)
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "document:1", Relation: "viewer", User: "user:bob"},
		&openfgav1.TupleKey{Object: "document:1", Relation: "viewer", User: "user:anne"},
		&openfgav1.TupleKey{Object: "document:1", Relation: "parent", User: "folder:x"},
		&openfgav1.TupleKey{Object: "folder:x", Relation: "viewer", User: "user:carl"},
	)
	tree, err := Expand(context.Background(), m, r, rel.ObjectRef{Type: "document", ID: "1"}, "viewer")
	if err != nil {
		t.Fatal(err)
	}
	got, err := protojson.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"root":{"name":"document:1#viewer","union":{"nodes":[` +
		`{"name":"document:1#viewer","leaf":{"users":{"users":["user:anne","user:bob"]}}},` +
		`{"name":"document:1#viewer","leaf":{"computed":{"userset":"document:1#owner"}}},` +
		`{"name":"document:1#viewer","leaf":{"tupleToUserset":{"tupleset":"document:1#parent","computed":[{"userset":"folder:x#viewer"}]}}}]}}}`
	var a, b openfgav1.UsersetTree
	if err := protojson.Unmarshal(got, &a); err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&a, &b) {
		t.Errorf("Expand:\n got %s\nwant %s", got, want)
	}
	if _, err := Expand(context.Background(), m, r, rel.ObjectRef{Type: "document", ID: "1"}, "nope"); ErrorCode(err) != openfgav1.ErrorCode_relation_not_found {
		t.Errorf("unknown relation: %v", err)
	}
}
