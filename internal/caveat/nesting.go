package caveat

import "strings"

// CEL's own parser bounds what a caveat or rule body may cost it: at most 100,000 code
// points (parser.ExpressionSizeCodePointLimit) and a recursion depth of 250
// (parser.MaxRecursionDepth). Its error for the second carries no position, so
// Compile points it at the bracket that opens the deepest nesting.

// recursionLimitMsg starts cel-go's error for an expression nested past its limit.
const recursionLimitMsg = "expression recursion limit exceeded"

// deepest returns the 1-based line and column of the first bracket that opens the
// deepest nesting of (), [] and {} in expr, skipping quoted strings; 1, 1 when expr
// has no brackets.
func deepest(expr string) (line, col int) {
	line, col = 1, 1
	depth, best := 0, 0
	l, c := 1, 1
	for i := 0; i < len(expr); i++ {
		switch ch := expr[i]; ch {
		case '\n':
			l, c = l+1, 0
		case '"', '\'':
			end := skipString(expr, i)
			l, c = advancePos(expr[i:end], l, c)
			i = end - 1
			continue
		case '(', '[', '{':
			if depth++; depth > best {
				best, line, col = depth, l, c
			}
		case ')', ']', '}':
			depth--
		}
		c++
	}
	return line, col
}

// skipString returns the index just past the string literal starting at expr[i]
// (single, double or triple quoted, with backslash escapes), or len(expr).
func skipString(expr string, i int) int {
	q := expr[i : i+1]
	if strings.HasPrefix(expr[i:], q+q+q) {
		q = q + q + q
	}
	for j := i + len(q); j < len(expr); j++ {
		switch {
		case expr[j] == '\\':
			j++
		case strings.HasPrefix(expr[j:], q):
			return j + len(q)
		}
	}
	return len(expr)
}

// advancePos moves a 1-based line and column over s.
func advancePos(s string, line, col int) (int, int) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
