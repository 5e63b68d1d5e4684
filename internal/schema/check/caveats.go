package check

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/schema/ast"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// caveatList validates and compiles every caveat, dropping repeated names.
func (c *checker) caveatList() []*ir.Caveat {
	c.caveats = map[string]*ast.Caveat{}
	var out []*ir.Caveat
	for _, cv := range c.file.Caveats {
		if !caveatName.MatchString(cv.Name) {
			c.errorf(cv.NamePos, "invalid caveat name `%s`: must be 1 to 128 letters, digits, underscores, `/`, `|` or `-`", cv.Name)
		}
		if first, dup := c.caveats[cv.Name]; dup {
			c.errorf(cv.NamePos, "duplicate caveat `%s` (first defined at %d:%d)", cv.Name, first.NamePos.Line, first.NamePos.Col)
			continue
		}
		c.caveats[cv.Name] = cv
		out = append(out, c.compileCaveat(cv))
	}
	return out
}

func (c *checker) compileCaveat(cv *ast.Caveat) *ir.Caveat {
	out := &ir.Caveat{Name: cv.Name, Doc: cv.Doc, Pos: ir.Pos(cv.Pos), Expression: cv.Expr}
	ok := true
	seen := map[string]bool{}
	for _, p := range cv.Params {
		if seen[p.Name] {
			c.errorf(p.Pos, "duplicate parameter `%s` in caveat `%s`", p.Name, cv.Name)
			ok = false
			continue
		}
		seen[p.Name] = true
		t, err := caveat.ParseType(p.Type)
		if err != nil {
			c.errorf(p.Pos, "invalid type for caveat parameter `%s` on caveat `%s`: %v", p.Name, cv.Name, err)
			ok = false
			continue
		}
		out.Params = append(out.Params, caveat.Param{Name: p.Name, Type: t})
	}
	if !ok {
		return out
	}
	// Reported as SpiceDB reports them, at the expression's start, with CEL's position
	// of the problem (in the schema's lines and columns) in the message.
	compiled, diags := caveat.Compile(cv.Name, out.Params, cv.Expr)
	for _, d := range diags {
		if d.Located {
			at := exprPos(cv.ExprPos, d.Line, d.Col)
			c.errorf(cv.ExprPos, "invalid expression for caveat `%s`: ERROR: %s:%d:%d: %s", cv.Name, cv.Name, at.Line, at.Col, d.Msg)
		} else {
			c.errorf(cv.ExprPos, "invalid expression for caveat `%s`: %s", cv.Name, d.Msg)
		}
	}
	if len(diags) > 0 {
		return out
	}
	out.Compiled = compiled
	c.checkUnusedParams(cv)
	return out
}

// exprPos maps a 1-based position inside a caveat expression to the schema source.
func exprPos(start ast.Pos, line, col int) ast.Pos {
	if line <= 1 {
		return ast.Pos{Line: start.Line, Col: start.Col + max(col, 1) - 1}
	}
	return ast.Pos{Line: start.Line + line - 1, Col: max(col, 1)}
}

// checkUnusedParams refuses a parameter the expression never names, as SpiceDB does.
// A name counts as used when it appears as an identifier that is not a field
// selection (`x.name`) and not inside a string literal.
func (c *checker) checkUnusedParams(cv *ast.Caveat) {
	used := celIdents(cv.Expr)
	for _, p := range cv.Params {
		if !used[p.Name] {
			c.typeErrorf(p.Pos, map[string]string{"caveat_name": cv.Name, "parameter_name": p.Name}, "parameter `%s` for caveat `%s` is unused", p.Name, cv.Name)
		}
	}
}

// celIdents lists the identifiers of a CEL expression that are not field selections.
func celIdents(expr string) map[string]bool {
	out := map[string]bool{}
	afterDot := false
	for i := 0; i < len(expr); {
		r, w := utf8.DecodeRuneInString(expr[i:])
		switch {
		case r == '"' || r == '\'':
			i = skipString(expr, i, false)
			afterDot = false
		case r == '/' && strings.HasPrefix(expr[i:], "//"):
			if nl := strings.IndexByte(expr[i:], '\n'); nl >= 0 {
				i += nl
			} else {
				i = len(expr)
			}
		case r == '_' || unicode.IsLetter(r):
			j := i
			for j < len(expr) {
				r2, w2 := utf8.DecodeRuneInString(expr[j:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
					break
				}
				j += w2
			}
			word := expr[i:j]
			if j < len(expr) && (expr[j] == '"' || expr[j] == '\'') && isStringPrefix(word) {
				i = skipString(expr, j, strings.ContainsAny(word, "rR"))
				afterDot = false
				continue
			}
			if !afterDot {
				out[word] = true
			}
			i, afterDot = j, false
		case unicode.IsDigit(r):
			for i < len(expr) && (expr[i] == '.' || expr[i] == '_' || isAlnum(expr[i])) {
				i++
			}
			afterDot = false
		case unicode.IsSpace(r):
			i += w
		default:
			afterDot = r == '.'
			i += w
		}
	}
	return out
}

func isAlnum(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

func isStringPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "b", "rb", "br":
		return true
	}
	return false
}

// skipString returns the index just past the string literal starting at i.
func skipString(s string, i int, raw bool) int {
	q := s[i : i+1]
	if strings.HasPrefix(s[i:], q+q+q) {
		q = q + q + q
	}
	i += len(q)
	for i < len(s) {
		switch {
		case s[i] == '\\' && !raw:
			i += 2
		case strings.HasPrefix(s[i:], q):
			return i + len(q)
		case len(q) == 1 && s[i] == '\n':
			return i
		default:
			i++
		}
	}
	return len(s)
}
