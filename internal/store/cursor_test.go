package store

import (
	"errors"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
)

func TestCursorRoundTrip(t *testing.T) {
	f := Filter{ResourceType: "document", ResourceIDs: []string{"a", "b"}, Subject: &SubjectFilter{Type: "user", RelationSet: true}}
	keys := []rel.Key{
		{},
		{ResourceType: "document", ResourceID: "readme", Relation: "viewer", SubjectType: "user", SubjectID: "*"},
		{ResourceType: "d", ResourceID: string(make([]byte, 300)), Relation: "r", SubjectType: "group", SubjectID: "eng", SubjectRelation: "member"},
	}
	codec := NewCursorCodec(f)
	for _, k := range keys {
		c := codec.Encode(k)
		got, err := codec.Decode(c)
		if err != nil || got != k {
			t.Fatalf("cursor %q decoded to %+v, %v; want %+v", c, got, err, k)
		}
	}
	// Listing the same ids in another order keeps cursors valid.
	same := f
	same.ResourceIDs = []string{"b", "a"}
	if _, err := NewCursorCodec(same).Decode(codec.Encode(keys[1])); err != nil {
		t.Fatalf("cursor refused for the same filter with reordered ids: %v", err)
	}
}

func TestCursorRefused(t *testing.T) {
	f := Filter{ResourceType: "document"}
	codec := NewCursorCodec(f)
	good := codec.Encode(rel.Key{ResourceType: "document", ResourceID: "a", Relation: "viewer", SubjectType: "user", SubjectID: "x"})
	others := []Filter{
		{ResourceType: "folder"},
		{ResourceType: "document", IncludeExpired: true},
		{ResourceType: "document", Subject: &SubjectFilter{}},
		{ResourceType: "document", ResourceIDPrefix: "a"},
		{ResourceType: "documen", Relation: "t"},
	}
	for _, o := range others {
		if _, err := NewCursorCodec(o).Decode(good); !errors.Is(err, ErrInvalidCursor) {
			t.Fatalf("cursor for %s accepted by %s: %v", f, o, err)
		}
	}
	for _, c := range []Cursor{"", "!!", good[:len(good)-2], good + "AA", "AQAAAAAA"} {
		if _, err := codec.Decode(c); !errors.Is(err, ErrInvalidCursor) {
			t.Fatalf("malformed cursor %q: %v, want ErrInvalidCursor", c, err)
		}
	}
}

func FuzzCursorDecode(f *testing.F) {
	codec := NewCursorCodec(Filter{})
	f.Add(string(codec.Encode(rel.Key{ResourceType: "a", ResourceID: "b"})))
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := codec.Decode(Cursor(s))
		if err != nil {
			return
		}
		if again, err := codec.Decode(codec.Encode(k)); err != nil || again != k {
			t.Fatalf("cursor %q decodes to %+v, which does not survive a round trip: %+v, %v", s, k, again, err)
		}
	})
}
