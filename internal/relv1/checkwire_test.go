package relv1_test

import (
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/relv1"
)

func checkRequests() []*v1.CheckPermissionRequest {
	obj := func(typ, id string) *v1.ObjectReference { return &v1.ObjectReference{ObjectType: typ, ObjectId: id} }
	token := &v1.ZedToken{Token: "GhUKEzE3MDAwMDAwMDAwMDAwMDAwMDA="}
	return []*v1.CheckPermissionRequest{
		{
			Consistency: &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}},
			Resource:    obj("content", "c42"), Permission: "view",
			Subject: &v1.SubjectReference{Object: obj("user", "u7")},
		},
		{
			Consistency: &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}},
			Resource:    obj("tenant/document", "d-1"), Permission: "edit",
			Subject: &v1.SubjectReference{Object: obj("group", "eng"), OptionalRelation: "member"}, WithTracing: true,
		},
		{
			Consistency: &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: token}},
			Resource:    obj("doc", "é"), Permission: "view", Subject: &v1.SubjectReference{Object: obj("user", "*")},
		},
		{Consistency: &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: token}}},
		{Consistency: &v1.Consistency{}, Resource: &v1.ObjectReference{}, Subject: &v1.SubjectReference{}},
		{},
	}
}

// TestDecodeCheckRequest: the requests clients send are decoded, and as the generated
// code decodes them; a caveat context, a field twice or an unknown field are left to
// the generated code.
func TestDecodeCheckRequest(t *testing.T) {
	for _, want := range checkRequests() {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got := &v1.CheckPermissionRequest{}
		if !relv1.DecodeCheckRequest(b, got) || !proto.Equal(got, want) {
			t.Errorf("DecodeCheckRequest(%v) = %v", want, got)
		}
	}
	withContext := checkRequests()[0]
	withContext.Context = &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(1)}}
	b, err := proto.Marshal(withContext)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := proto.Marshal(checkRequests()[0])
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"a caveat context":          b,
		"a field twice":             append(append([]byte{}, plain...), 0x1a, 4, 'v', 'i', 'e', 'w'),
		"an unknown field":          append(append([]byte{}, plain...), 0x38, 1),
		"invalid UTF-8":             append(append([]byte{}, plain...), 0x1a, 2, 0xff, 0xfe),
		"two consistency branches":  append([]byte{0x0a, 4, 0x08, 1, 0x20, 1}, plain[4:]...),
		"a bool as bytes":           {0x32, 1, 1},
		"a truncated length prefix": {0x1a, 5, 'v'},
	} {
		if relv1.DecodeCheckRequest(b, &v1.CheckPermissionRequest{}) {
			t.Errorf("%s: decoded; want it left to the generated code", name)
		}
	}
}

// FuzzDecodeCheckRequest: whatever the fast decoder takes, the generated code takes
// too, to the same message.
func FuzzDecodeCheckRequest(f *testing.F) {
	for _, req := range checkRequests() {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := &v1.CheckPermissionRequest{}
		if !relv1.DecodeCheckRequest(b, got) {
			return
		}
		want := &v1.CheckPermissionRequest{}
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatalf("fast decoder took %x, which the generated code refuses: %v", b, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("%x: fast decoder %v, generated code %v", b, got, want)
		}
	})
}

// BenchmarkDecodeCheckRequest decodes the social workload's check request with the
// generated code and with DecodeCheckRequest.
func BenchmarkDecodeCheckRequest(b *testing.B) {
	msg, err := proto.Marshal(checkRequests()[0])
	if err != nil {
		b.Fatal(err)
	}
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(msg, &v1.CheckPermissionRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !relv1.DecodeCheckRequest(msg, &v1.CheckPermissionRequest{}) {
				b.Fatal("not decoded")
			}
		}
	})
}
