package schema

import (
	"fmt"
	"strings"

	"github.com/latch-authz/latch/internal/schema/ir"
)

// Format prints s as canonical schema text: `use` flags first, then caveats, then
// definitions, each separated by a blank line; members indented by one tab; doc
// comments kept; expressions with only the parentheses the precedence needs
// (`-` loosest, then `&`, then `+`). Compiling the output gives back s.
func Format(s *ir.Schema) string {
	var blocks []string
	if len(s.UseFlags) > 0 {
		var b strings.Builder
		for _, f := range s.UseFlags {
			fmt.Fprintf(&b, "use %s\n", f)
		}
		blocks = append(blocks, b.String())
	}
	for _, c := range s.Caveats {
		blocks = append(blocks, formatCaveat(c))
	}
	for _, d := range s.Definitions {
		blocks = append(blocks, formatDefinition(d))
	}
	return strings.Join(blocks, "\n")
}

// writeDoc writes a doc comment, indented. Text that is not already a comment (an IR
// built by other means) is turned into line comments so the output still parses.
func writeDoc(b *strings.Builder, doc, indent string) {
	if doc == "" {
		return
	}
	isComment := strings.HasPrefix(doc, "//") || strings.HasPrefix(doc, "/*")
	for i, line := range strings.Split(doc, "\n") {
		switch {
		case !isComment:
			line = "// " + line
		case i > 0 && strings.HasPrefix(line, "*"):
			line = " " + line // the ` * ` column of a block comment
		}
		b.WriteString(strings.TrimRight(indent+line, " \t") + "\n")
	}
}

func formatCaveat(c *ir.Caveat) string {
	var b strings.Builder
	writeDoc(&b, c.Doc, "")
	params := make([]string, len(c.Params))
	for i, p := range c.Params {
		params[i] = p.Name + " " + fmt.Sprint(p.Type) // caveat.Type prints as the schema spells it
	}
	fmt.Fprintf(&b, "caveat %s(%s) {\n\t%s\n}\n", c.Name, strings.Join(params, ", "), c.Expression)
	return b.String()
}

func formatDefinition(d *ir.Definition) string {
	var b strings.Builder
	writeDoc(&b, d.Doc, "")
	if len(d.Relations) == 0 {
		fmt.Fprintf(&b, "definition %s {}\n", d.Name)
		return b.String()
	}
	fmt.Fprintf(&b, "definition %s {\n", d.Name)
	for _, r := range d.Relations {
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

// level is an operator's binding strength; higher binds tighter.
func level(k ir.ExprKind) int {
	switch k {
	case ir.Exclusion:
		return 1
	case ir.Intersection:
		return 2
	case ir.Union:
		return 3
	}
	return 4
}

var opText = map[ir.ExprKind]string{ir.Union: " + ", ir.Intersection: " & ", ir.Exclusion: " - "}

// FormatExpr prints a rewrite expression with minimal parentheses.
func FormatExpr(e *ir.Expr) string {
	if e == nil {
		return "nil"
	}
	switch e.Kind {
	case ir.Ref:
		return e.Name
	case ir.Nil:
		return "nil"
	case ir.Arrow:
		if e.ArrowKind == ir.ArrowAll {
			return e.Tupleset + ".all(" + e.Target + ")"
		}
		return e.Tupleset + "->" + e.Target
	}
	switch len(e.Children) {
	case 0:
		return "nil"
	case 1:
		return FormatExpr(e.Children[0])
	}
	parts := make([]string, len(e.Children))
	for i, c := range e.Children {
		parts[i] = operand(e.Kind, c, i > 0)
	}
	return strings.Join(parts, opText[e.Kind])
}

// operand prints child of an operator of kind parent, parenthesized when needed:
// always when it binds looser, and on the right of `-` when it is another `-` (the
// operators group left to right; `+` and `&` are associative, so they need none).
func operand(parent ir.ExprKind, child *ir.Expr, right bool) string {
	s := FormatExpr(child)
	if child.Kind != ir.Ref && child.Kind != ir.Nil && child.Kind != ir.Arrow && len(child.Children) == 1 {
		return operand(parent, child.Children[0], right)
	}
	pl, cl := level(parent), level(child.Kind)
	if cl < pl || cl == pl && right && parent == ir.Exclusion {
		return "(" + s + ")"
	}
	return s
}
