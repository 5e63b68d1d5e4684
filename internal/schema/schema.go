// Package schema is the front door of the schema compiler: Compile turns SpiceDB
// schema text into the immutable IR the engine evaluates, reporting every problem
// with its position, and Format prints an IR back as canonical schema text.
package schema

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/check"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schema/zed"
)

// Diagnostic is one positioned problem in a schema; String() is "line:col: msg".
type Diagnostic = ast.Diagnostic

// DiagnosticsError lists every problem found in a schema, sorted by position.
type DiagnosticsError struct {
	Diagnostics []Diagnostic
	// Source is the schema text the positions refer to, when it is SpiceDB schema
	// text (Permify schemas are lowered first and leave it empty).
	Source string
}

// SourceAt returns the source text at p: the name or number starting there, else
// the one character there, else "" (p past the end, or no Source).
func (e *DiagnosticsError) SourceAt(p ast.Pos) string {
	rest := e.Source
	for range p.Line - 1 {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			return ""
		}
		rest = rest[i+1:]
	}
	if line, _, ok := strings.Cut(rest, "\n"); ok {
		rest = line
	}
	if p.Col < 1 || p.Col > len(rest) {
		return ""
	}
	rest = rest[p.Col-1:]
	n := 0
	for n < len(rest) && n < maxSourceAt && isNameByte(rest[n]) {
		n++
	}
	if n == 0 {
		_, size := utf8.DecodeRuneInString(rest)
		n = size
	}
	return rest[:n]
}

// maxSourceAt bounds SourceAt: a name longer than this is not a schema's name.
const maxSourceAt = 128

func isNameByte(b byte) bool {
	return b == '_' || b == '/' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// Error joins the diagnostics, one per line.
func (e *DiagnosticsError) Error() string {
	lines := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Compile parses and checks a schema written in SpiceDB's schema language. On
// failure the error is a *DiagnosticsError. When the text has syntax errors only
// those are reported: checking a half-parsed schema would add noise, not news.
func Compile(src string) (*ir.Schema, error) { return CompileContext(context.Background(), src) }

// CompileContext is Compile that gives up when ctx ends, returning ctx's error, so a
// large schema stops costing CPU once its caller has gone.
func CompileContext(ctx context.Context, src string) (*ir.Schema, error) {
	f, diags, err := zed.ParseContext(ctx, src)
	if err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		check.Sort(diags)
		return nil, &DiagnosticsError{Diagnostics: diags, Source: src}
	}
	s, diags, err := check.CheckContext(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		return nil, &DiagnosticsError{Diagnostics: diags, Source: src}
	}
	return s, nil
}

// Warnings compiles src and returns what SpiceDB's tooling warns about but accepts
// (for example an arrow whose target exists on none of its relation's subject
// types). It returns nil when src does not compile.
func Warnings(src string) []Diagnostic {
	f, diags := zed.Parse(src)
	if len(diags) > 0 {
		return nil
	}
	s, diags := check.Check(f)
	if len(diags) > 0 {
		return nil
	}
	return check.Lint(f, s)
}
