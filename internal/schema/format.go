package schema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/schema/ir"
)

// Format prints s as canonical schema text, as SpiceDB prints a schema: `use` flags
// first, then caveats, then definitions, each sorted by name and separated by a
// blank line, with no final newline; caveat parameters sorted by name; caveat
// expressions as CEL prints them back; members indented by one tab, in declaration
// order, a commented one set off by a blank line; doc comments laid out as SpiceDB
// lays them out (writeDoc); expressions parenthesized as SpiceDB does (FormatExpr).
// Compiling the output gives back s, but for the order of its definitions and
// caveats and the layout of comments and caveat expressions.
func Format(s *ir.Schema) string {
	var blocks []string
	if len(s.UseFlags) > 0 {
		var b strings.Builder
		for _, f := range s.UseFlags {
			fmt.Fprintf(&b, "use %s\n", f)
		}
		blocks = append(blocks, b.String())
	}
	for _, c := range slices.SortedFunc(slices.Values(s.Caveats), func(a, b *ir.Caveat) int { return strings.Compare(a.Name, b.Name) }) {
		blocks = append(blocks, formatCaveat(c))
	}
	for _, d := range slices.SortedFunc(slices.Values(s.Definitions), func(a, b *ir.Definition) int { return strings.Compare(a.Name, b.Name) }) {
		blocks = append(blocks, formatDefinition(d))
	}
	return strings.TrimSuffix(strings.Join(blocks, "\n"), "\n")
}

// writeDoc writes a doc comment, indented, as SpiceDB prints one: each `//` comment as
// `// text`; each block comment on one line when its text is one line of at most
// maxOneLineComment characters, else with a ` * text` line for each line of its text.
// Text that is not a comment (an IR built by other means) becomes line comments.
func writeDoc(b *strings.Builder, doc, indent string) {
	if doc == "" {
		return
	}
	if !strings.HasPrefix(doc, "//") && !strings.HasPrefix(doc, "/*") {
		for _, line := range strings.Split(doc, "\n") {
			b.WriteString(indent + "// " + strings.TrimSpace(line) + "\n")
		}
		return
	}
	for _, c := range splitComments(doc) {
		writeComment(b, c, indent)
	}
}

// maxOneLineComment is the longest block comment text SpiceDB prints on one line.
const maxOneLineComment = 70

func writeComment(b *strings.Builder, c, indent string) {
	if strings.HasPrefix(c, "//") {
		b.WriteString(indent + "// " + strings.TrimSpace(strings.TrimPrefix(c, "//")) + "\n")
		return
	}
	open := "/*"
	if strings.HasPrefix(c, "/**") {
		open = "/**"
	}
	text := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(c, open), "*/"))
	line := func(s string) string { return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "*")) }
	if len(text) <= maxOneLineComment && !strings.Contains(text, "\n") {
		b.WriteString(indent + open + " " + line(text) + " */\n")
		return
	}
	b.WriteString(indent + open + "\n")
	for _, l := range strings.Split(text, "\n") {
		b.WriteString(indent + " * " + line(l) + "\n")
	}
	b.WriteString(indent + " */\n")
}

// splitComments splits a doc into its comments: `//` lines and `/* */` blocks.
func splitComments(doc string) []string {
	var out []string
	rest := strings.TrimSpace(doc)
	for rest != "" {
		var c string
		if strings.HasPrefix(rest, "/*") {
			end := strings.Index(rest[2:], "*/")
			if end < 0 {
				end = len(rest) - 4 // unterminated: the rest is the comment
			}
			c, rest = rest[:end+4], rest[end+4:]
		} else {
			c, rest, _ = strings.Cut(rest, "\n")
		}
		out = append(out, c)
		rest = strings.TrimSpace(rest)
	}
	return out
}

func formatCaveat(c *ir.Caveat) string {
	var b strings.Builder
	writeDoc(&b, c.Doc, "")
	params := make([]string, len(c.Params))
	for i, p := range c.Params {
		params[i] = p.Name + " " + fmt.Sprint(p.Type) // caveat.Type prints as the schema spells it
	}
	slices.Sort(params) // by name: a name is followed by a space, which sorts before any name character
	fmt.Fprintf(&b, "caveat %s(%s) {\n\t%s\n}\n", c.Name, strings.Join(params, ", "), strings.ReplaceAll(CaveatExpression(c), "\n", "\n\t"))
	return b.String()
}

// CaveatExpression is c's expression as SpiceDB prints it (caveat.Compiled.Canonical),
// or as written when it is not compiled.
func CaveatExpression(c *ir.Caveat) string {
	if c.Compiled == nil {
		return c.Expression
	}
	return c.Compiled.Canonical()
}

func formatDefinition(d *ir.Definition) string {
	var b strings.Builder
	writeDoc(&b, d.Doc, "")
	if len(d.Relations) == 0 {
		fmt.Fprintf(&b, "definition %s {}\n", d.Name)
		return b.String()
	}
	fmt.Fprintf(&b, "definition %s {\n", d.Name)
	for i, r := range d.Relations {
		if r.Doc != "" && i > 0 {
			b.WriteString("\n") // SpiceDB sets a commented member off from the one before
		}
		writeDoc(&b, r.Doc, "\t")
		if r.IsPermission() {
			fmt.Fprintf(&b, "\tpermission %s = %s\n", r.Name, FormatExpr(r.Rewrite))
			continue
		}
		types := make([]string, len(r.Allowed))
		for i, a := range r.Allowed {
			types[i] = a.String()
		}
		fmt.Fprintf(&b, "\trelation %s: %s\n", r.Name, strings.Join(types, " | "))
	}
	b.WriteString("}\n")
	return b.String()
}

var opText = map[ir.ExprKind]string{ir.Union: " + ", ir.Intersection: " & ", ir.Exclusion: " - "}

// FormatExpr prints a rewrite expression with SpiceDB's parentheses: around every
// operand that is itself an operation, except a union of unions (`+` binds tightest)
// and an operand of the same associative operator (SpiceDB's compiler merges those).
// Every parenthesis the precedence needs (`-` loosest, then `&`, then `+`) is there.
func FormatExpr(e *ir.Expr) string {
	var b strings.Builder
	writeExpr(&b, e)
	return b.String()
}

// writeExpr writes e into one builder, so printing costs time linear in its output.
func writeExpr(b *strings.Builder, e *ir.Expr) {
	if e == nil {
		b.WriteString("nil")
		return
	}
	switch e.Kind {
	case ir.Ref:
		b.WriteString(e.Name)
		return
	case ir.Nil:
		b.WriteString("nil")
		return
	case ir.Arrow:
		b.WriteString(e.Tupleset)
		switch {
		case e.ArrowKind == ir.ArrowAll:
			b.WriteString(".all(" + e.Target + ")")
		case e.AnySpelled:
			b.WriteString(".any(" + e.Target + ")")
		default:
			b.WriteString("->" + e.Target)
		}
		return
	}
	switch len(e.Children) {
	case 0:
		b.WriteString("nil")
		return
	case 1:
		writeExpr(b, e.Children[0])
		return
	}
	for i, c := range e.Children {
		if i > 0 {
			b.WriteString(opText[e.Kind])
		}
		writeOperand(b, e.Kind, c)
	}
}

// writeOperand prints child of an operator of kind parent, parenthesized as FormatExpr
// says.
func writeOperand(b *strings.Builder, parent ir.ExprKind, child *ir.Expr) {
	for isOperation(child) && len(child.Children) == 1 {
		child = child.Children[0]
	}
	if !isOperation(child) || isAllUnion(child) || child.Kind == parent && parent != ir.Exclusion {
		writeExpr(b, child)
		return
	}
	b.WriteString("(")
	writeExpr(b, child)
	b.WriteString(")")
}

// isOperation reports whether e is an operator with operands (one without prints as nil).
func isOperation(e *ir.Expr) bool {
	return (e.Kind == ir.Union || e.Kind == ir.Intersection || e.Kind == ir.Exclusion) && len(e.Children) > 0
}

// isAllUnion reports whether e is a union whose operands are leaves or all-unions.
func isAllUnion(e *ir.Expr) bool {
	if e.Kind != ir.Union {
		return false
	}
	for _, c := range e.Children {
		if isOperation(c) && !isAllUnion(c) {
			return false
		}
	}
	return true
}
