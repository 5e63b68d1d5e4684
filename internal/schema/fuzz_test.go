package schema

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCompile checks that no input panics, that every diagnostic has a position
// inside the input, and that whatever compiles survives Format unchanged.
// Seeds: testdata/fuzz/FuzzCompile, the golden inputs and the shared schemas.
//
//	go test ./internal/schema -run '^$' -fuzz FuzzCompile -fuzztime 30s
func FuzzCompile(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/format/*.zed")
	for _, in := range inputs {
		if src, err := os.ReadFile(in); err == nil {
			f.Add(string(src))
		}
	}
	for _, src := range sharedSchemas(f) {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := Compile(src)
		if err != nil {
			var de *DiagnosticsError
			if !errors.As(err, &de) || len(de.Diagnostics) == 0 {
				t.Fatalf("error %v is not a non-empty *DiagnosticsError", err)
			}
			lines := strings.Count(src, "\n") + 1
			for _, d := range de.Diagnostics {
				if d.Pos.Line < 1 || d.Pos.Line > lines || d.Pos.Col < 1 {
					t.Fatalf("diagnostic %v outside the input (%d lines)", d, lines)
				}
			}
			return
		}
		text := Format(s)
		again, err := Compile(text)
		if err != nil {
			t.Fatalf("formatted schema does not compile: %v\n%s", err, text)
		}
		if d := diffSchemas(s, again); d != "" {
			t.Fatalf("format round trip changed the schema: %s\n%s", d, text)
		}
	})
}
