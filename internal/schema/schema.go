// Package schema is the front door of the schema compiler: Compile turns SpiceDB
// schema text into the immutable IR the engine evaluates, reporting every problem
// with its position, and Format prints an IR back as canonical schema text.
package schema

import (
	"strings"

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
func Compile(src string) (*ir.Schema, error) {
	f, diags := zed.Parse(src)
	if len(diags) > 0 {
		check.Sort(diags)
		return nil, &DiagnosticsError{Diagnostics: diags}
	}
	s, diags := check.Check(f)
	if len(diags) > 0 {
		return nil, &DiagnosticsError{Diagnostics: diags}
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
