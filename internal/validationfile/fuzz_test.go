package validationfile

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

// FuzzParse feeds arbitrary text to Parse: it must never panic, and every problem and
// every parsed item must carry a position inside the file.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodFile))
	f.Add([]byte(failingFile))
	f.Add([]byte("schema: >-\n  definition a {}\n\n  definition b {}\nrelationships: >-\n  a:1#r@b:2[c:{\"x\": [1, \"]\"]}]\n"))
	f.Add([]byte("assertions:\n  assertTrue: [\"a:1#b@c:2 with {\\\"k\\\": 1}\"]\n"))
	f.Add([]byte("relationships: |\n  a:1#r@b:2 a:1#r@b:3\n  // c\n"))
	f.Add([]byte("validation:\n  document:1#view:\n    - \"[user:* - {user:a[...]}] is <document:1#viewer>\"\n  document:2#view: []\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		lines := 1
		for _, b := range src {
			if b == '\n' {
				lines++
			}
		}
		file, err := Parse("f.yaml", src)
		if err != nil {
			var pe *ProblemsError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %v is not a non-empty *ProblemsError", err)
			}
			for _, p := range pe.Problems {
				if p.Line < 0 || p.Line > lines {
					t.Fatalf("problem %q is on line %d of a %d-line file", p, p.Line, lines)
				}
			}
			return
		}
		for _, r := range file.Relationships {
			if r.Line < 1 || r.Line > lines {
				t.Fatalf("relationship %q is on line %d of a %d-line file", r.Text, r.Line, lines)
			}
		}
		for _, er := range file.Validation {
			for _, es := range er.Subjects {
				if es.Line < 1 || es.Line > lines {
					t.Fatalf("expected subject %q is on line %d of a %d-line file", es.Text, es.Line, lines)
				}
			}
		}
	})
}

// FuzzParseExpectedSubject: a line that parses renders back to a line that parses to
// the same subject and relations, which is what --update relies on.
func FuzzParseExpectedSubject(f *testing.F) {
	f.Add("[user:tom] is <document:1#writer>")
	f.Add("[user:*[...] - {user:bob, user:ann[...]}] is <document:1#viewer>/<folder:x#viewer>")
	f.Add("[group:eng#member[...]] is <group:all#member>")
	f.Add("[user:tom]")
	f.Fuzz(func(t *testing.T, text string) {
		es, err := parseExpectedSubject(text)
		if err != nil {
			return
		}
		line := subjectLine(es.Subject, es.Resources)
		again, err := parseExpectedSubject(line)
		if err != nil {
			t.Fatalf("%q parsed, but its rendering %q does not: %v", text, line, err)
		}
		if !reflect.DeepEqual(again.Subject, es.Subject) || !slices.Equal(again.Resources, es.Resources) {
			t.Fatalf("%q renders as %q, which parses differently: %+v vs %+v", text, line, again, es)
		}
	})
}
