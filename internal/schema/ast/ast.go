// Package ast owns the syntax tree that schema parsers produce and the type checker
// consumes: definitions, relations, permissions with their expressions, caveats and
// `use` flags, each carrying the 1-based source position of its first character, plus
// the positioned Diagnostic every stage of the compiler reports problems with.
//
// The tree is language-neutral: the SpiceDB (.zed) parser fills it directly, and a
// Permify parser maps `entity`/`or`/`and`/`not` onto the same nodes.
package ast

import (
	"context"
	"fmt"
	"slices"
)

// Pos is a 1-based line and column in schema source (columns count bytes).
type Pos struct{ Line, Col int }

// Diagnostic is one positioned problem found in a schema.
type Diagnostic struct {
	Pos Pos
	Msg string
	// About is set on type errors — a name that resolves to nothing, a duplicate
	// relation, an illegal use of a name — and labels the names involved under the
	// keys SpiceDB's ErrorInfo uses (definition_name, relation_name, caveat_name, ...),
	// because SpiceDB clients branch on them. Syntax errors leave it nil.
	About map[string]string
}

// String renders "line:col: msg".
func (d Diagnostic) String() string { return fmt.Sprintf("%d:%d: %s", d.Pos.Line, d.Pos.Col, d.Msg) }

// Before orders diagnostics by position, then message, so output is deterministic.
func (d Diagnostic) Before(o Diagnostic) bool {
	if d.Pos.Line != o.Pos.Line {
		return d.Pos.Line < o.Pos.Line
	}
	if d.Pos.Col != o.Pos.Col {
		return d.Pos.Col < o.Pos.Col
	}
	return d.Msg < o.Msg
}

// File is one parsed schema.
type File struct {
	Uses        []*Use
	Caveats     []*Caveat
	Definitions []*Definition
}

// Use is a `use flag` statement.
type Use struct {
	Pos     Pos // of the `use` keyword
	Flag    string
	FlagPos Pos
}

// Definition is an object type: `definition tenant/document { ... }`.
type Definition struct {
	Pos     Pos // of the `definition` keyword
	Name    string
	NamePos Pos
	Doc     string // comments directly above, one comment per line group, or ""
	// Relations holds relations and permissions in declaration order.
	Relations []*Relation
}

// Relation is a relation (`relation viewer: user | group#member`) or a permission
// (`permission view = viewer + editor`), told apart by IsPermission.
type Relation struct {
	Pos          Pos // of the `relation` or `permission` keyword
	Name         string
	NamePos      Pos
	Doc          string
	IsPermission bool

	// Types is a relation's allowed subject types; for a permission, its optional type
	// annotation (`permission view: user = ...`, meaningful under `use typechecking`).
	Types []*TypeRef
	// Expr is a permission's expression; nil for a relation.
	Expr Expr
}

// TypeRef is one entry of a relation's type list.
type TypeRef struct {
	Pos      Pos // of the type name
	Type     string
	Relation string // subject relation after `#`; "" when absent; "..." when written as ellipsis
	Wildcard bool   // `type:*`

	Caveat        string // `with caveat`; "" when absent
	CaveatPos     Pos
	Expiration    bool // `with expiration` or `with caveat and expiration`
	ExpirationPos Pos
}

// Expr is a permission expression node.
type Expr interface {
	// Position is where the expression's first token starts.
	Position() Pos
	exprNode()
}

// BinaryOp is a set operator.
type BinaryOp int

const (
	// Union is `+` (Permify `or`).
	Union BinaryOp = iota + 1
	// Intersection is `&` (Permify `and`).
	Intersection
	// Exclusion is `-` (Permify `not`).
	Exclusion
)

// String renders the .zed spelling of the operator.
func (op BinaryOp) String() string {
	switch op {
	case Union:
		return "+"
	case Intersection:
		return "&"
	case Exclusion:
		return "-"
	}
	return "?"
}

// Binary is `Left op Right`.
type Binary struct {
	Op    BinaryOp
	OpPos Pos
	Left  Expr
	Right Expr
}

// Ident names a relation or permission of the same definition.
type Ident struct {
	Pos  Pos
	Name string
}

// ArrowFunc tells the arrow spellings apart.
type ArrowFunc int

const (
	// ArrowPlain is `rel->perm` (and Permify's `rel.perm`).
	ArrowPlain ArrowFunc = iota
	// ArrowAny is `rel.any(perm)`.
	ArrowAny
	// ArrowAll is `rel.all(perm)`.
	ArrowAll
)

// Arrow walks Tupleset's subjects and evaluates Target on each.
type Arrow struct {
	Tupleset *Ident
	Target   *Ident
	Func     ArrowFunc
}

// Nil is the empty set.
type Nil struct{ Pos Pos }

// Paren is a parenthesized expression, kept so tools can print what was written.
type Paren struct {
	Pos Pos // of `(`
	X   Expr
}

// Position implements Expr. It walks the left spine in a loop: a flat union of n
// terms is a chain n deep.
func (e *Binary) Position() Pos {
	x := e.Left
	for {
		b, ok := x.(*Binary)
		if !ok {
			return x.Position()
		}
		x = b.Left
	}
}

// MaxNesting bounds how deeply parentheses (and type parameters) may nest in a schema
// of either language, so that hostile input cannot exhaust the stack of the parsers
// and of every walker after them.
const MaxNesting = 200

// Spine unrolls the left-nested chain of binary operators at e: a left-associative
// `a + b + c` is Binary{Binary{a, b}, c}, and a flat union of n terms is a chain n
// deep. It returns the innermost left operand that is not a Binary and the chain's
// Binary nodes from the innermost out (chain[len-1] is e); a non-Binary e is its own
// leaf with an empty chain. Walkers go along the chain in a loop and recurse only into
// right operands and parentheses, whose depth the parsers bound.
func Spine(e Expr) (leaf Expr, chain []*Binary) {
	for {
		b, ok := e.(*Binary)
		if !ok {
			slices.Reverse(chain)
			return e, chain
		}
		chain = append(chain, b)
		e = b.Left
	}
}

// Leaves calls visit on every operand of e that is neither a Binary nor a Paren, in
// source order, without recursing along left-nested chains.
func Leaves(e Expr, visit func(Expr)) {
	leaf, chain := Spine(e)
	leaves(leaf, visit)
	for _, b := range chain {
		leaves(b.Right, visit)
	}
}

func leaves(e Expr, visit func(Expr)) {
	switch e := e.(type) {
	case *Paren:
		Leaves(e.X, visit)
	case *Binary:
		Leaves(e, visit)
	default:
		visit(e)
	}
}

// Position implements Expr.
func (e *Ident) Position() Pos { return e.Pos }

// Position implements Expr.
func (e *Arrow) Position() Pos { return e.Tupleset.Pos }

// Position implements Expr.
func (e *Nil) Position() Pos { return e.Pos }

// Position implements Expr.
func (e *Paren) Position() Pos { return e.Pos }

func (*Binary) exprNode() {}
func (*Ident) exprNode()  {}
func (*Arrow) exprNode()  {}
func (*Nil) exprNode()    {}
func (*Paren) exprNode()  {}

// Caveat is `caveat name(p1 type, ...) { CEL }`.
type Caveat struct {
	Pos     Pos // of the `caveat` keyword
	Name    string
	NamePos Pos
	Doc     string
	Params  []*Param
	// Expr is the CEL source between the braces with surrounding whitespace trimmed;
	// ExprPos is where its first character is.
	Expr    string
	ExprPos Pos
}

// Param is one typed caveat parameter.
type Param struct {
	Pos     Pos
	Name    string
	Type    string // canonical spelling, without spaces: "int", "list<int>", "map<list<string>>"
	TypePos Pos
}

// Stopper tells a long compile that its caller has gone. Stopped is cheap enough to
// call once per token or operand: it consults the context once every stopEvery calls.
type Stopper struct {
	ctx   context.Context
	calls int
	err   error
}

// stopEvery is how many Stopped calls pass between looks at the context.
const stopEvery = 1024

// NewStopper returns a Stopper for ctx.
func NewStopper(ctx context.Context) *Stopper { return &Stopper{ctx: ctx} }

// Stopped reports whether the context has ended, as of the last look.
func (s *Stopper) Stopped() bool {
	if s.err != nil {
		return true
	}
	s.calls++
	if s.calls%stopEvery == 0 {
		s.err = s.ctx.Err()
	}
	return s.err != nil
}

// Err returns the context's error once Stopped has seen it end (looking once more), or nil.
func (s *Stopper) Err() error {
	if s.err == nil {
		s.err = s.ctx.Err()
	}
	return s.err
}
