package server

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latch-authz/latch/internal/relv1"
)

// checkDecodeImport checks that relv1.FromImportRequest, when it answers, gives what
// the generated code and the request checks give.
func checkDecodeImport(t testing.TB, b []byte) (fast bool) {
	t.Helper()
	got, ok := relv1.FromImportRequest(b)
	if !ok {
		return false
	}
	s := &Server{cfg: Config{MaxRelationshipContextBytes: 1 << 20}}
	want, err := s.decodeImportGenerated(b)
	if err != nil {
		t.Fatalf("relv1.FromImportRequest accepted %x, which the generated code and checks refuse", b)
	}
	if len(want) == 0 {
		want = nil
	}
	if len(got) == 0 {
		got = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("relv1.FromImportRequest(%x) = %v, the generated code gives %v", b, got, want)
	}
	return true
}

func importMessage(t testing.TB, rels ...*v1.Relationship) []byte {
	t.Helper()
	b, err := proto.Marshal(&v1.ImportBulkRelationshipsRequest{Relationships: rels})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wireRel(resType, resID, relation, subjType, subjID, subjRel string) *v1.Relationship {
	return &v1.Relationship{
		Resource: &v1.ObjectReference{ObjectType: resType, ObjectId: resID},
		Relation: relation,
		Subject:  &v1.SubjectReference{Object: &v1.ObjectReference{ObjectType: subjType, ObjectId: subjID}, OptionalRelation: subjRel},
	}
}

// TestDecodeImport checks which messages the fast decoder takes and that it agrees
// with the generated code on them; the rest it leaves to that code.
func TestDecodeImport(t *testing.T) {
	plain := []*v1.Relationship{
		wireRel("document", "d1", "viewer", "user", "alice", ""),
		wireRel("org/document", "d-2|x=y+z", "editor", "group", "eng", "member"),
		wireRel("document", "d1", "viewer", "user", "*", ""),
	}
	if !checkDecodeImport(t, importMessage(t, plain...)) {
		t.Fatal("the fast decoder refused plain relationships")
	}
	if !checkDecodeImport(t, nil) {
		t.Fatal("the fast decoder refused an empty message")
	}
	expiring := wireRel("document", "d1", "viewer", "user", "bob", "")
	expiring.OptionalExpiresAt = timestamppb.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	caveated := wireRel("document", "d1", "viewer", "user", "carol", "")
	caveated.OptionalCaveat = &v1.ContextualizedCaveat{CaveatName: "ip", Context: &structpb.Struct{}}
	noSubject := wireRel("document", "d1", "viewer", "user", "dan", "")
	noSubject.Subject = nil
	left := map[string][]byte{
		"expiration":        importMessage(t, plain[0], expiring),
		"caveat":            importMessage(t, caveated, plain[0]),
		"no subject":        importMessage(t, noSubject),
		"wildcard resource": importMessage(t, wireRel("document", "*", "viewer", "user", "eve", "")),
		"bad type":          importMessage(t, wireRel("Document", "d1", "viewer", "user", "eve", "")),
		"wildcard relation": importMessage(t, wireRel("document", "d1", "viewer", "user", "*", "member")),
		"invalid utf-8":     bytes.Replace(importMessage(t, wireRel("document", "d1", "viewer", "user", "eve", "")), []byte("d1"), []byte("d\xff"), 1),
	}
	// A field given twice, which the generated code merges: a resource in two parts.
	rb, err := proto.Marshal(wireRel("document", "d1", "viewer", "user", "frank", ""))
	if err != nil {
		t.Fatal(err)
	}
	rb = protowire.AppendTag(rb, 1, protowire.BytesType)
	rb = protowire.AppendBytes(rb, protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "d2"))
	left["resource twice"] = protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rb)
	unknown := protowire.AppendTag(importMessage(t, plain[0]), 2, protowire.BytesType)
	left["unknown field"] = protowire.AppendString(unknown, "x")
	msg := importMessage(t, plain...)
	left["truncated"] = msg[:len(msg)-3]
	for name, b := range left {
		if checkDecodeImport(t, b) {
			t.Errorf("%s: the fast decoder took a message it should leave to the generated code", name)
		}
	}
}

// FuzzDecodeImport checks that whatever the fast decoder takes, the generated code and
// the request checks take too, with the same relationships.
func FuzzDecodeImport(f *testing.F) {
	f.Add(importMessage(f, wireRel("document", "d1", "viewer", "user", "alice", "")))
	f.Add(importMessage(f, wireRel("org/document", "d-2", "editor", "group", "eng", "member"), wireRel("document", "d1", "viewer", "user", "*", "")))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeImport(t, b)
	})
}
