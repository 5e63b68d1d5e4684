package schema

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/schema/ir"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata/format")

// TestFormatGolden formats every testdata/format/*.zed and compares with its .golden
// file; `go test -run TestFormatGolden -rewrite` updates them.
func TestFormatGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/format/*.zed")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Compile(string(src))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got := Format(s)
			golden := strings.TrimSuffix(in, ".zed") + ".golden"
			if *rewrite {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -rewrite to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Format mismatch; got:\n%s\nwant:\n%s", got, want)
			}
			again, err := Compile(got)
			if err != nil {
				t.Fatalf("formatted text does not compile: %v", err)
			}
			if d := diffSchemas(s, again); d != "" {
				t.Errorf("formatted text compiles to a different schema: %s", d)
			}
		})
	}
}

// Parentheses as SpiceDB prints them (checked against SpiceDB 1.56's ReadSchema).
func TestFormatExprParens(t *testing.T) {
	ref := func(n string) *ir.Expr { return &ir.Expr{Kind: ir.Ref, Name: n} }
	op := func(k ir.ExprKind, c ...*ir.Expr) *ir.Expr { return &ir.Expr{Kind: k, Children: c} }
	tests := []struct {
		e    *ir.Expr
		want string
	}{
		{op(ir.Exclusion, op(ir.Exclusion, ref("a"), ref("b")), ref("c")), "(a - b) - c"},
		{op(ir.Exclusion, ref("a"), op(ir.Exclusion, ref("b"), ref("c"))), "a - (b - c)"},
		{op(ir.Union, op(ir.Exclusion, ref("a"), ref("b")), ref("c")), "(a - b) + c"},
		{op(ir.Exclusion, ref("a"), op(ir.Union, ref("b"), ref("c"))), "a - b + c"},
		{op(ir.Exclusion, ref("a"), op(ir.Intersection, ref("b"), ref("c"))), "a - (b & c)"},
		{op(ir.Exclusion, ref("a"), op(ir.Union, op(ir.Intersection, ref("b"), ref("c")), ref("d"))), "a - ((b & c) + d)"},
		{op(ir.Intersection, op(ir.Union, ref("a"), ref("b")), ref("c")), "a + b & c"},
		{op(ir.Intersection, op(ir.Union, ref("a"), op(ir.Union, ref("b"), ref("c"))), ref("d")), "a + b + c & d"},
		{op(ir.Union, ref("a"), op(ir.Intersection, ref("b"), ref("c"))), "a + (b & c)"},
		{op(ir.Union, ref("a"), op(ir.Union, op(ir.Intersection, ref("b"), ref("c")), ref("d"))), "a + (b & c) + d"},
		{op(ir.Union, ref("a"), op(ir.Union, ref("b"), ref("c"))), "a + b + c"},
		{op(ir.Intersection, ref("a"), op(ir.Intersection, ref("b"), ref("c"))), "a & b & c"},
		{op(ir.Union, op(ir.Union, ref("a"))), "a"},
		{op(ir.Union, ref("a"), op(ir.Intersection)), "a + nil"},
		{op(ir.Exclusion, ref("a"), op(ir.Union, op(ir.Exclusion, ref("b"), ref("c")))), "a - (b - c)"},
		{&ir.Expr{Kind: ir.Arrow, Tupleset: "parent", Target: "view", ArrowKind: ir.ArrowAll}, "parent.all(view)"},
		{&ir.Expr{Kind: ir.Arrow, Tupleset: "parent", Target: "view", AnySpelled: true}, "parent.any(view)"},
		{&ir.Expr{Kind: ir.Arrow, Tupleset: "parent", Target: "view"}, "parent->view"},
		{op(ir.Union), "nil"},
		{nil, "nil"},
	}
	for _, tt := range tests {
		if got := FormatExpr(tt.e); got != tt.want {
			t.Errorf("FormatExpr = %q, want %q", got, tt.want)
		}
	}
}

func TestFormatDocWithoutMarkers(t *testing.T) {
	s := ir.NewSchema([]*ir.Definition{{Name: "user", Doc: "plain text\nsecond"}}, nil, nil)
	got := Format(s)
	if got != "// plain text\n// second\ndefinition user {}" {
		t.Errorf("Format = %q", got)
	}
	if _, err := Compile(got); err != nil {
		t.Error(err)
	}
}
