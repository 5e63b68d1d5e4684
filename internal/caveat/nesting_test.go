package caveat

import (
	"strings"
	"testing"
)

// TestDeepNestingIsAPositionedError holds what cel-go's limits answer for hostile
// bodies: nesting past its recursion limit is an error at the deepest bracket, and an
// expression past its size limit an error too, neither a crash.
func TestDeepNestingIsAPositionedError(t *testing.T) {
	params := []Param{{Name: "a", Type: mustType(t, "bool")}}
	for _, c := range []struct {
		name, expr, want string
		line, col        int
	}{
		{"parentheses", "a &&\n" + strings.Repeat("(", 300) + "a" + strings.Repeat(")", 300), recursionLimitMsg, 2, 300},
		{"lists", `"(" != "" && ` + strings.Repeat("[", 260) + "a" + strings.Repeat("]", 260) + " != []", recursionLimitMsg, 1, 13 + 260},
		{"a million parentheses", strings.Repeat("(", 1_000_000) + "a" + strings.Repeat(")", 1_000_000), "code point size exceeds limit", 1, 1},
		{"a long chain", "a" + strings.Repeat(" && a", 30_000), "code point size exceeds limit", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, diags := Compile("c", params, c.expr)
			if len(diags) == 0 {
				t.Fatal("compiled")
			}
			d := diags[0]
			if !strings.Contains(d.Msg, c.want) || d.Line != c.line || d.Col != c.col {
				t.Errorf("got %d:%d %q; want %d:%d %q", d.Line, d.Col, d.Msg, c.line, c.col, c.want)
			}
		})
	}
}
