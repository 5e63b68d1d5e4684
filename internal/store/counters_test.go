package store

import (
	"strings"
	"testing"
)

// TestCounterFilterStoredForm pins the stored form: registrations written by this
// version must read the same in every later one.
func TestCounterFilterStoredForm(t *testing.T) {
	f := Filter{
		ResourceType: "document", ResourceIDs: []string{"a"}, Relation: "viewer",
		Subject: &SubjectFilter{Type: "group", IDs: nil, Relation: "member", RelationSet: true},
	}
	raw, err := EncodeCounterFilter(f)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"resource_type":"document","resource_ids":["a"],"resource_id_prefix":"","relation":"viewer",` +
		`"subject":{"type":"group","ids":null,"relation":"member","relation_set":true},"include_expired":false}`
	if string(raw) != want {
		t.Fatalf("stored form:\n got  %s\n want %s", raw, want)
	}
}

func TestDecodeCounterFilterRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		`{"v":2,"resource_type":"document"}`: "version 2",
		`{"resource_type":"document"}`:       "version 0",
		`{"v":1,`:                            "damaged",
	} {
		if _, err := DecodeCounterFilter([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decoding %s: %v; want an error saying %q", raw, err, want)
		}
	}
}
