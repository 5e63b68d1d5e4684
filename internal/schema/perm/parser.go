package perm

import (
	"fmt"
	"strings"

	"github.com/latch-authz/latch/internal/schema/ast"
)

// Syntax tree of one Permify schema, before it is lowered onto the shared ast.

type file struct {
	entities []*entity
	rules    []*rule
}

type entity struct {
	pos, namePos ast.Pos
	name         string
	members      []*member
}

type memberKind int

const (
	mRelation memberKind = iota + 1
	mAttribute
	mPermission
)

type member struct {
	kind         memberKind
	pos, namePos ast.Pos
	name         string
	types        []*ast.TypeRef // mRelation
	attrType     string         // mAttribute: "boolean", "string[]", ...
	attrTypePos  ast.Pos
	expr         expr // mPermission
	keyword      string
}

type rule struct {
	pos, namePos ast.Pos
	name         string
	params       []*param
	body         string
	bodyPos      ast.Pos
}

type param struct {
	pos, typePos ast.Pos
	name, typ    string
}

type expr interface{ position() ast.Pos }

type opKind int

const (
	opOr opKind = iota + 1
	opAnd
	opNot
)

type binary struct {
	op          opKind
	opPos       ast.Pos
	left, right expr
}

type ident struct {
	pos  ast.Pos
	name string
}

type arrow struct{ tupleset, target *ident }

type call struct {
	pos  ast.Pos
	name string
	args []*ident
}

type paren struct {
	pos ast.Pos
	x   expr
}

func (e *binary) position() ast.Pos {
	x := e.left
	for b, ok := x.(*binary); ok; b, ok = x.(*binary) {
		x = b.left
	}
	return x.position()
}
func (e *ident) position() ast.Pos { return e.pos }
func (e *arrow) position() ast.Pos { return e.tupleset.pos }
func (e *call) position() ast.Pos  { return e.pos }
func (e *paren) position() ast.Pos { return e.pos }

// attributeTypes are the attribute and rule parameter types Permify accepts, each also
// as an array (`string[]`).
var attributeTypes = map[string]bool{"boolean": true, "string": true, "integer": true, "double": true}

// syntaxError stops parsing: the parser reports the first syntax error only, because
// what follows a broken statement rarely means what it seems to.
type syntaxError struct{ d ast.Diagnostic }

type parser struct {
	lx    *lexer
	tok   token
	depth int // parentheses open around the current token
	stop  *ast.Stopper
}

// parse reads src. It returns the tree, or nil and the first syntax error. It stops
// early, returning nothing, once stop says the caller has gone.
func parse(src string, stop *ast.Stopper) (f *file, diags []ast.Diagnostic) {
	p := &parser{lx: newLexer(src), stop: stop}
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(syntaxError)
			if !ok {
				panic(r)
			}
			f, diags = nil, []ast.Diagnostic{se.d}
		}
	}()
	p.advance()
	f = p.file()
	if len(p.lx.diags) > 0 {
		return nil, p.lx.diags[:1]
	}
	return f, nil
}

func (p *parser) advance() {
	if p.stop.Stopped() {
		panic(syntaxError{ast.Diagnostic{Pos: p.tok.pos, Msg: "the compile was abandoned"}})
	}
	p.tok = p.lx.next()
	if len(p.lx.diags) > 0 {
		panic(syntaxError{p.lx.diags[0]})
	}
}

func (p *parser) fail(at ast.Pos, format string, args ...any) {
	panic(syntaxError{ast.Diagnostic{Pos: at, Msg: fmt.Sprintf(format, args...)}})
}

func (p *parser) expect(k tokKind, what string) token {
	if p.tok.kind != k {
		p.fail(p.tok.pos, "expected %s %s, found %s", tokNames[k], what, p.tok.describe())
	}
	t := p.tok
	p.advance()
	return t
}

func (p *parser) name(what string) token {
	if p.tok.kind != tIdent {
		p.fail(p.tok.pos, "expected %s, found %s", what, p.tok.describe())
	}
	if keywords[p.tok.text] {
		p.fail(p.tok.pos, "expected %s, found keyword `%s` (keywords cannot be used as names)", what, p.tok.text)
	}
	t := p.tok
	p.advance()
	return t
}

var keywords = map[string]bool{
	"entity": true, "relation": true, "attribute": true, "permission": true, "action": true,
	"rule": true, "or": true, "and": true, "not": true,
}

func (p *parser) file() *file {
	f := &file{}
	for p.tok.kind != tEOF {
		switch {
		case p.tok.kind == tIdent && p.tok.text == "entity":
			f.entities = append(f.entities, p.entity())
		case p.tok.kind == tIdent && p.tok.text == "rule":
			f.rules = append(f.rules, p.rule())
		default:
			p.fail(p.tok.pos, "expected `entity` or `rule`, found %s", p.tok.describe())
		}
	}
	return f
}

func (p *parser) entity() *entity {
	e := &entity{pos: p.tok.pos}
	p.advance()
	n := p.name("an entity name")
	e.name, e.namePos = n.text, n.pos
	p.expect(tLBrace, "to open entity `"+e.name+"`")
	for p.tok.kind != tRBrace {
		if p.tok.kind == tEOF {
			p.fail(p.tok.pos, "entity `%s` is not closed: expected `}`", e.name)
		}
		e.members = append(e.members, p.member())
	}
	p.advance()
	return e
}

func (p *parser) member() *member {
	if p.tok.kind != tIdent {
		p.fail(p.tok.pos, "expected `relation`, `attribute`, `permission`, `action` or `}`, found %s", p.tok.describe())
	}
	m := &member{pos: p.tok.pos, keyword: p.tok.text}
	switch p.tok.text {
	case "relation":
		m.kind = mRelation
	case "attribute":
		m.kind = mAttribute
	case "permission", "action":
		m.kind = mPermission
	default:
		p.fail(p.tok.pos, "expected `relation`, `attribute`, `permission`, `action` or `}`, found %s", p.tok.describe())
	}
	p.advance()
	n := p.name("a " + m.keyword + " name")
	m.name, m.namePos = n.text, n.pos
	switch m.kind {
	case mRelation:
		m.types = p.relationTypes(m)
	case mAttribute:
		m.attrType, m.attrTypePos = p.typeName("attribute `" + m.name + "`")
	case mPermission:
		p.expect(tEq, "after "+m.keyword+" `"+m.name+"`")
		m.expr = p.expr()
		p.endOfPermission(m)
	}
	return m
}

// endOfPermission insists the expression is followed by a new member or the entity's
// end, so `a or b c` is an error rather than a silently dropped `c`.
func (p *parser) endOfPermission(m *member) {
	if p.tok.kind == tRBrace || p.tok.kind == tIdent && keywords[p.tok.text] {
		return
	}
	p.fail(p.tok.pos, "expected `or`, `and`, `not` or the end of %s `%s`, found %s", m.keyword, m.name, p.tok.describe())
}

func (p *parser) relationTypes(m *member) []*ast.TypeRef {
	var types []*ast.TypeRef
	for p.tok.kind == tAt {
		p.advance()
		t := p.name("an entity type after `@`")
		ref := &ast.TypeRef{Pos: t.pos, Type: t.text}
		if p.tok.kind == tHash {
			p.advance()
			ref.Relation = p.name("a relation name after `#`").text
		}
		types = append(types, ref)
	}
	if len(types) == 0 {
		p.fail(p.tok.pos, "relation `%s` needs at least one subject type such as `@user`, found %s", m.name, p.tok.describe())
	}
	return types
}

// typeName reads `boolean`, `string[]`, ...
func (p *parser) typeName(what string) (string, ast.Pos) {
	if p.tok.kind != tIdent || !attributeTypes[p.tok.text] {
		p.fail(p.tok.pos, "expected the type of %s (boolean, string, integer or double, optionally followed by `[]`), found %s", what, p.tok.describe())
	}
	t := p.tok
	p.advance()
	if p.tok.kind == tLBrack {
		p.advance()
		p.expect(tRBrack, "to close the array type `"+t.text+"[]`")
		return t.text + "[]", t.pos
	}
	return t.text, t.pos
}

func (p *parser) rule() *rule {
	r := &rule{pos: p.tok.pos}
	p.advance()
	n := p.name("a rule name")
	r.name, r.namePos = n.text, n.pos
	p.expect(tLParen, "after rule name `"+r.name+"`")
	for p.tok.kind != tRParen {
		if len(r.params) > 0 {
			p.expect(tComma, "between the parameters of rule `"+r.name+"`")
		}
		pn := p.name("a parameter name")
		typ, typPos := p.typeName("parameter `" + pn.text + "`")
		r.params = append(r.params, &param{pos: pn.pos, name: pn.text, typ: typ, typePos: typPos})
	}
	p.advance()
	if p.tok.kind != tLBrace {
		p.fail(p.tok.pos, "expected `{` to open the body of rule `%s`, found %s", r.name, p.tok.describe())
	}
	// The token after `{` has not been read, so the lexer stands right after the brace.
	body, at, ok := p.lx.rawBlock()
	if !ok {
		p.fail(p.tok.pos, "the body of rule `%s` is not closed: expected `}`", r.name)
	}
	r.body, r.bodyPos = trimBody(body, at)
	p.advance()
	return r
}

// trimBody trims the CEL body and moves its position to its first non-blank character.
func trimBody(body string, at ast.Pos) (string, ast.Pos) {
	for len(body) > 0 && strings.ContainsRune(" \t\r\n", rune(body[0])) {
		if body[0] == '\n' {
			at.Line++
			at.Col = 1
		} else {
			at.Col++
		}
		body = body[1:]
	}
	return strings.TrimRight(body, " \t\r\n"), at
}

var ops = map[string]opKind{"or": opOr, "and": opAnd, "not": opNot}

// expr parses a permission expression. Permify gives `or`, `and` and `not` one
// precedence and groups them left to right: `a or b and c` is `(a or b) and c`.
func (p *parser) expr() expr {
	left := p.term()
	for p.tok.kind == tIdent {
		op, ok := ops[p.tok.text]
		if !ok {
			break
		}
		at := p.tok.pos
		p.advance()
		left = &binary{op: op, opPos: at, left: left, right: p.term()}
	}
	return left
}

func (p *parser) term() expr {
	if p.tok.kind == tLParen {
		at := p.tok.pos
		if p.depth >= ast.MaxNesting {
			p.fail(at, "expression nested too deeply (more than %d parentheses)", ast.MaxNesting)
		}
		p.depth++
		p.advance()
		x := p.expr()
		p.depth--
		p.expect(tRParen, "to close the parenthesis opened at "+fmt.Sprintf("%d:%d", at.Line, at.Col))
		return &paren{pos: at, x: x}
	}
	n := p.name("a relation, permission, attribute or rule call")
	id := &ident{pos: n.pos, name: n.text}
	switch p.tok.kind {
	case tDot:
		p.advance()
		t := p.name("a relation or permission after `.`")
		return &arrow{tupleset: id, target: &ident{pos: t.pos, name: t.text}}
	case tLParen:
		return p.call(id)
	}
	return id
}

func (p *parser) call(id *ident) expr {
	c := &call{pos: id.pos, name: id.name}
	p.advance()
	for p.tok.kind != tRParen {
		if len(c.args) > 0 {
			p.expect(tComma, "between the arguments of rule `"+c.name+"`")
		}
		a := p.name("an attribute name as an argument of rule `" + c.name + "`")
		if p.tok.kind == tDot {
			p.fail(p.tok.pos, "rule arguments must be attributes of the entity; `%s.` is not supported", a.text)
		}
		c.args = append(c.args, &ident{pos: a.pos, name: a.text})
	}
	p.advance()
	return c
}
