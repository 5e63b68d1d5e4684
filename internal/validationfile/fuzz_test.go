package validationfile

import (
	"errors"
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
	})
}
