package schema_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schema/perm"
)

// Hostile schemas: deep nesting is a positioned error, flat chains of any length
// compile in time linear in their size, and a compile stops when its caller goes.

// language compiles one schema language.
type language struct {
	name    string
	compile func(ctx context.Context, src string) (*ir.Schema, error)
	// chain writes a permission `view` over relation `viewer` joined n times by op.
	chain func(n int, op string) string
	ops   []string
}

var languages = []language{
	{
		name:    "zed",
		compile: schema.CompileContext,
		chain: func(n int, op string) string {
			return "definition user {}\ndefinition document {\n\trelation viewer: user\n\tpermission view = viewer" +
				strings.Repeat(" "+op+" viewer", n-1) + "\n}\n"
		},
		ops: []string{"+", "&", "-"},
	},
	{
		name: "permify",
		compile: func(ctx context.Context, src string) (*ir.Schema, error) {
			return perm.CompileContext(ctx, src, perm.Options{PermifyNames: true})
		},
		chain: func(n int, op string) string {
			return "entity user {}\nentity document {\n\trelation viewer @user\n\tpermission view = viewer" +
				strings.Repeat(" "+op+" viewer", n-1) + "\n}\n"
		},
		ops: []string{"or", "and", "not"},
	},
}

// nested wraps `viewer` in depth parentheses inside lang's permission.
func nested(lang language, depth int) string {
	src := lang.chain(1, "")
	return strings.Replace(src, "= viewer", "= "+strings.Repeat("(", depth)+"viewer"+strings.Repeat(")", depth), 1)
}

func TestDeepNestingIsAPositionedError(t *testing.T) {
	for _, lang := range languages {
		for _, depth := range []int{201, 1_000_000} {
			t.Run(fmt.Sprintf("%s/%d", lang.name, depth), func(t *testing.T) {
				_, err := lang.compile(context.Background(), nested(lang, depth))
				var de *schema.DiagnosticsError
				if !errors.As(err, &de) {
					t.Fatalf("got %v, want diagnostics", err)
				}
				d := de.Diagnostics[0]
				// The 201st parenthesis, on line 4 after the tab and `permission view = `.
				if d.Pos.Line != 4 || d.Pos.Col != 20+200 || !strings.Contains(d.Msg, "nested too deeply (more than 200 parentheses)") {
					t.Errorf("got %v", d)
				}
			})
		}
		t.Run(lang.name+"/200", func(t *testing.T) {
			if _, err := lang.compile(context.Background(), nested(lang, 200)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFlatChainsCompile compiles 100,000-term chains of `+` and `&` (and Permify's
// `or` and `and`), which merge into one operator; chains that nest one level per
// operator (exclusions, alternating operators) compile up to ast.MaxNesting levels,
// print back in a form that compiles again, and are refused past it.
func TestFlatChainsCompile(t *testing.T) {
	const n = 100_000
	for _, lang := range languages {
		for _, op := range lang.ops[:2] {
			t.Run(lang.name+"/"+op, func(t *testing.T) {
				s, err := lang.compile(context.Background(), lang.chain(n, op))
				if err != nil {
					t.Fatal(err)
				}
				if x := s.Definition("document").Relation("view").Rewrite; len(x.Children) != n {
					t.Fatalf("%d children, want %d", len(x.Children), n)
				}
			})
		}
		exclusion := lang.ops[2]
		t.Run(lang.name+"/"+exclusion, func(t *testing.T) {
			s, err := lang.compile(context.Background(), lang.chain(201, exclusion))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := schema.Compile(schema.Format(s)); err != nil {
				t.Fatalf("a chain 200 deep does not print back in a form that compiles: %v", err)
			}
			for _, src := range []string{lang.chain(202, exclusion), lang.chain(n, exclusion)} {
				_, err := lang.compile(context.Background(), src)
				var de *schema.DiagnosticsError
				if !errors.As(err, &de) || de.Diagnostics[0].Pos.Line != 4 || !strings.Contains(de.Diagnostics[0].Msg, "nests operators more than 200 deep") {
					t.Errorf("got %v, want a refusal on line 4", err)
				}
			}
		})
	}
	mixed := "entity user {}\nentity document {\n\trelation viewer @user\n\tpermission view = viewer" +
		strings.Repeat(" or viewer and viewer", n/2) + "\n}\n"
	if _, err := perm.CompileContext(context.Background(), mixed, perm.Options{}); err == nil || !strings.Contains(err.Error(), "nests operators more than 200 deep") {
		t.Errorf("alternating operators 100,000 deep: got %v", err)
	}
}

func TestCompileStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, lang := range languages {
		if _, err := lang.compile(ctx, lang.chain(10_000, lang.ops[0])); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: got %v, want context.Canceled", lang.name, err)
		}
	}
}

// BenchmarkCompileFlatUnion shows compilation growing linearly with a flat union's
// terms (it was quadratic: 0.3 s at 8k terms, minutes at 100k).
//
//	go test ./internal/schema -run '^$' -bench CompileFlatUnion -benchmem
func BenchmarkCompileFlatUnion(b *testing.B) {
	for _, lang := range languages {
		for _, n := range []int{8_000, 16_000, 64_000} {
			src := lang.chain(n, lang.ops[0])
			b.Run(fmt.Sprintf("%s/%d", lang.name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if _, err := lang.compile(context.Background(), src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// FuzzNesting feeds deeply nested and long expressions to both languages: nothing may
// panic or exhaust the stack, and every refusal is positioned inside the input.
// Seeds: testdata/fuzz/FuzzNesting.
//
//	go test ./internal/schema -run '^$' -fuzz FuzzNesting -fuzztime 30s
func FuzzNesting(f *testing.F) {
	f.Add(uint32(1_000_000), "(", ")", "viewer")
	f.Add(uint32(100_000), "viewer + ", "", "viewer")
	f.Add(uint32(50_000), "(viewer or ", ")", "viewer")
	f.Fuzz(func(t *testing.T, n uint32, open, close, inner string) {
		n %= 1 << 20
		if int(n)*(len(open)+len(close)) > 4<<20 {
			t.Skip("larger than a request may be")
		}
		expr := strings.Repeat(open, int(n)) + inner + strings.Repeat(close, int(n))
		for _, lang := range languages {
			src := strings.Replace(lang.chain(1, ""), "= viewer", "= "+expr, 1)
			_, err := lang.compile(context.Background(), src)
			var de *schema.DiagnosticsError
			if err == nil {
				continue
			}
			if !errors.As(err, &de) || len(de.Diagnostics) == 0 {
				t.Fatalf("%s: error %v is not a non-empty *DiagnosticsError", lang.name, err)
			}
			lines := strings.Count(src, "\n") + 1
			for _, d := range de.Diagnostics {
				if d.Pos.Line < 1 || d.Pos.Line > lines || d.Pos.Col < 1 {
					t.Fatalf("%s: diagnostic %v outside the input (%d lines)", lang.name, d, lines)
				}
			}
		}
	})
}
