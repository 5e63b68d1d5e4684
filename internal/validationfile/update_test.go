package validationfile

import (
	"strings"
	"testing"
)

func TestUpdateValidationEdges(t *testing.T) {
	long := "document:" + strings.Repeat("x", 1024) + "#view"
	results := []RelationResult{{
		Expected: ExpectedRelation{Key: long},
		Found:    []FoundSubject{{SubjectText: SubjectText{Subject: "user:a"}, Resources: []string{"document:x#viewer"}}},
	}}
	for name, c := range map[string]struct{ src, want string }{
		"last key, no final newline": {
			"schema: x\nvalidation:\n  old: []",
			"schema: x\nvalidation:\n  ? " + long + "\n  :\n    - \"[user:a] is <document:x#viewer>\"",
		},
		"comment and blank line before the next key are kept": {
			"validation:\n  old: []\n  # inside\n\n# before assertions\nassertions: {}\n",
			"validation:\n  ? " + long + "\n  :\n    - \"[user:a] is <document:x#viewer>\"\n\n# before assertions\nassertions: {}\n",
		},
		"no section": {"schema: x\n", "schema: x\n"},
	} {
		got, err := UpdateValidation([]byte(c.src), results)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, c.want)
		}
	}
	f, err := Parse("long.yaml", []byte("validation:\n  ? "+long+"\n  : []\n"))
	if err != nil || len(f.Validation) != 1 || f.Validation[0].Key != long {
		t.Errorf("an explicit long key does not parse back: %v", err)
	}
	if _, err := UpdateValidation([]byte("{validation: {a: []}}"), results); err == nil || !strings.Contains(err.Error(), "flow-style") {
		t.Errorf("flow-style file: %v", err)
	}
}
