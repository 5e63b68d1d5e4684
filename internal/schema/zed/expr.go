package zed

import "github.com/latch-authz/latch/internal/schema/ast"

// levels lists the binary operators from loosest to tightest, as SpiceDB's parser
// does: exclusion, then intersection, then union.
var levels = []struct {
	tok tokKind
	op  ast.BinaryOp
}{
	{tMinus, ast.Exclusion},
	{tAmp, ast.Intersection},
	{tPlus, ast.Union},
}

// parseExpr parses a permission expression.
func (p *parser) parseExpr() (ast.Expr, bool) { return p.parseLevel(0) }

// parseLevel parses a left-associative chain of the operator at levels[i] whose
// operands are expressions of the tighter levels.
func (p *parser) parseLevel(i int) (ast.Expr, bool) {
	if i == len(levels) {
		return p.parseArrow()
	}
	left, ok := p.parseLevel(i + 1)
	if !ok {
		return nil, false
	}
	for p.tok.kind == levels[i].tok {
		opPos := p.tok.pos
		p.next()
		right, ok := p.parseLevel(i + 1)
		if !ok {
			return nil, false
		}
		left = &ast.Binary{Op: levels[i].op, OpPos: opPos, Left: left, Right: right}
	}
	return left, true
}

// parseArrow parses an operand: a base expression, or `ident->ident`,
// `ident.any(ident)`, `ident.all(ident)`. A chained arrow parses but is reported, as
// SpiceDB does not support nested arrows.
func (p *parser) parseArrow() (ast.Expr, bool) {
	if p.tok.kind != tIdent || reserved[p.tok.text] {
		return p.parseBase()
	}
	left := &ast.Ident{Pos: p.tok.pos, Name: p.tok.text}
	p.next()
	if p.tok.kind != tArrow && p.tok.kind != tDot {
		return left, true
	}
	arrow, ok := p.parseArrowTail(left)
	if !ok {
		return nil, false
	}
	for p.tok.kind == tArrow || p.tok.kind == tDot {
		p.errorf(p.tok.pos, "nested arrows are not supported: `%s` already walks an arrow; use a permission on the target type instead", arrow.Tupleset.Name)
		if _, ok := p.parseArrowTail(arrow.Target); !ok {
			return nil, false
		}
	}
	return arrow, true
}

// parseArrowTail parses `->target` or `.any(target)` / `.all(target)` after left.
func (p *parser) parseArrowTail(left *ast.Ident) (*ast.Arrow, bool) {
	arrow := &ast.Arrow{Tupleset: left}
	if p.accept(tArrow) {
		target, ok := p.arrowTarget("`->`")
		arrow.Target = target
		return arrow, ok
	}
	p.next() // `.`
	switch {
	case p.isWord("any"):
		arrow.Func = ast.ArrowAny
	case p.isWord("all"):
		arrow.Func = ast.ArrowAll
	default:
		p.unexpected("`any` or `all` after `.`")
		return nil, false
	}
	p.next()
	if !p.expect(tLParen, "`(` after `"+funcName(arrow.Func)+"`") {
		return nil, false
	}
	target, ok := p.arrowTarget("`" + funcName(arrow.Func) + "(`")
	if !ok {
		return nil, false
	}
	arrow.Target = target
	return arrow, p.expect(tRParen, "`)` to close `"+funcName(arrow.Func)+"(`")
}

func funcName(f ast.ArrowFunc) string {
	if f == ast.ArrowAll {
		return "all"
	}
	return "any"
}

func (p *parser) arrowTarget(after string) (*ast.Ident, bool) {
	if p.tok.kind != tIdent || reserved[p.tok.text] {
		p.unexpected("relation or permission name after " + after)
		return nil, false
	}
	id := &ast.Ident{Pos: p.tok.pos, Name: p.tok.text}
	p.next()
	return id, true
}

// parseBase parses `nil` or a parenthesized expression.
func (p *parser) parseBase() (ast.Expr, bool) {
	switch {
	case p.isWord("nil"):
		n := &ast.Nil{Pos: p.tok.pos}
		p.next()
		return n, true
	case p.tok.kind == tLParen:
		return p.parseParen()
	}
	p.unexpected("a relation, permission, `nil` or `(`")
	return nil, false
}

func (p *parser) parseParen() (ast.Expr, bool) {
	open := p.tok.pos
	if p.depth >= maxDepth {
		p.errorf(open, "expression nested too deeply (more than %d parentheses)", maxDepth)
		return nil, false
	}
	p.depth++
	defer func() { p.depth-- }()
	p.next()
	x, ok := p.parseExpr()
	if !ok {
		return nil, false
	}
	if !p.expect(tRParen, "`)` or an operator") {
		return nil, false
	}
	return &ast.Paren{Pos: open, X: x}, true
}
