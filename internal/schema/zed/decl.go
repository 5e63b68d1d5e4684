package zed

import (
	"strings"

	"github.com/latch-authz/latch/internal/schema/ast"
)

func (p *parser) parseDefinition() {
	def := &ast.Definition{Pos: p.tok.pos, Doc: docOf(p.tok)}
	p.next()
	var ok bool
	if def.Name, def.NamePos, ok = p.typePath("definition name"); !ok {
		p.syncTop()
		return
	}
	p.file.Definitions = append(p.file.Definitions, def)
	if !p.expect(tLBrace, "`{`") {
		p.syncTop()
		return
	}
	p.parseMembers(def)
}

// parseMembers parses relations and permissions up to the definition's closing brace.
func (p *parser) parseMembers(def *ast.Definition) {
	for {
		switch {
		case p.accept(tRBrace):
			return
		case p.accept(tSemi):
		case p.tok.kind == tEOF:
			p.errorf(p.tok.pos, "expected `}` to close definition `%s`", def.Name)
			return
		case p.isWord("definition") || p.isWord("caveat"):
			p.errorf(p.tok.pos, "expected `}` to close definition `%s` before `%s`", def.Name, p.tok.text)
			return
		case p.isWord("relation") || p.isWord("permission"):
			r, ok := p.parseMember()
			if r != nil {
				def.Relations = append(def.Relations, r)
			}
			if ok {
				ok = p.endStatement()
			}
			if !ok {
				p.syncMember()
			}
		default:
			p.unexpected("`relation`, `permission` or `}`")
			p.next()
			p.syncMember()
		}
	}
}

// endStatement checks that a statement is followed by something that can follow a
// statement. Newlines are not required: `relation a: x relation b: y` is two statements.
func (p *parser) endStatement() bool {
	switch {
	case p.tok.kind == tSemi, p.tok.kind == tRBrace, p.tok.kind == tEOF,
		p.isWord("relation"), p.isWord("permission"), p.isWord("definition"), p.isWord("caveat"):
		return true
	}
	p.unexpected("end of statement")
	return false
}

// syncMember skips to the next statement of a definition body, stepping over any
// balanced braces so a stray block does not end the definition early.
func (p *parser) syncMember() {
	depth := 0
	for p.tok.kind != tEOF {
		switch {
		case p.isWord("definition") || p.isWord("caveat"):
			return
		case depth == 0 && (p.isWord("relation") || p.isWord("permission") || p.tok.kind == tRBrace):
			return
		case p.tok.kind == tLBrace:
			depth++
		case p.tok.kind == tRBrace:
			depth--
		}
		p.next()
	}
}

// parseMember parses one relation or permission. It returns the node even when a
// later part failed, so the checker still knows the name exists.
func (p *parser) parseMember() (*ast.Relation, bool) {
	r := &ast.Relation{Pos: p.tok.pos, Doc: docOf(p.tok), IsPermission: p.tok.text == "permission"}
	what := "relation name"
	if r.IsPermission {
		what = "permission name"
	}
	p.next()
	var ok bool
	if r.Name, r.NamePos, ok = p.name(what); !ok {
		return nil, false
	}
	if !r.IsPermission {
		if !p.expect(tColon, "`:` after relation name") {
			return r, false
		}
		r.Types, ok = p.parseTypeList()
		return r, ok
	}
	if p.accept(tColon) {
		if r.Types, ok = p.parseTypeList(); !ok {
			return r, false
		}
	}
	if !p.expect(tEquals, "`=` after permission name") {
		return r, false
	}
	r.Expr, ok = p.parseExpr()
	return r, ok
}

// parseTypeList parses `t1 | t2 | ...`.
func (p *parser) parseTypeList() ([]*ast.TypeRef, bool) {
	var refs []*ast.TypeRef
	for {
		ref, ok := p.parseTypeRef()
		if !ok {
			return refs, false
		}
		refs = append(refs, ref)
		if !p.accept(tPipe) {
			return refs, true
		}
	}
}

// parseTypeRef parses `type`, `type:*`, `type#rel` or `type#...`, each optionally
// followed by `with caveat`, `with expiration` or `with caveat and expiration`.
func (p *parser) parseTypeRef() (*ast.TypeRef, bool) {
	ref := &ast.TypeRef{}
	var ok bool
	if ref.Type, ref.Pos, ok = p.typePath("subject type"); !ok {
		return nil, false
	}
	switch {
	case p.accept(tColon):
		if !p.expect(tStar, "`*` after `:` in a wildcard subject type") {
			return nil, false
		}
		ref.Wildcard = true
	case p.accept(tHash):
		if p.accept(tEllipsis) {
			ref.Relation = "..."
		} else if ref.Relation, _, ok = p.name("subject relation after `#`"); !ok {
			return nil, false
		}
	}
	if !p.isWord("with") {
		return ref, true
	}
	p.next()
	return ref, p.parseTraits(ref)
}

// parseTraits parses what follows `with`. `expiration` is always read as the trait
// here; whether the schema enabled it (or instead names a caveat `expiration`) is the
// checker's business.
func (p *parser) parseTraits(ref *ast.TypeRef) bool {
	if !p.isWord("expiration") {
		var ok bool
		if ref.Caveat, ref.CaveatPos, ok = p.typePath("caveat name or `expiration` after `with`"); !ok {
			return false
		}
		if !p.isWord("and") {
			return true
		}
		p.next()
		if !p.isWord("expiration") {
			p.unexpected("`expiration` after `and`")
			return false
		}
	}
	ref.Expiration, ref.ExpirationPos = true, p.tok.pos
	p.next()
	return true
}

func (p *parser) parseCaveat() {
	c := &ast.Caveat{Pos: p.tok.pos, Doc: docOf(p.tok)}
	p.next()
	var ok bool
	if c.Name, c.NamePos, ok = p.typePath("caveat name"); !ok {
		p.syncTop()
		return
	}
	if !p.parseParams(c) {
		p.syncTop()
		return
	}
	if p.tok.kind != tLBrace {
		p.unexpected("`{` to start the caveat expression")
		p.syncTop()
		return
	}
	open := p.tok.pos
	body, at, ok := p.s.scanCEL()
	if !ok {
		p.errorf(open, "unterminated caveat expression: missing `}`")
		p.next()
		return
	}
	p.next()
	if body == "" {
		p.errorf(open, "missing caveat expression for caveat `%s`", c.Name)
		return
	}
	c.Expr, c.ExprPos = body, at
	p.file.Caveats = append(p.file.Caveats, c)
}

// parseParams parses `(name type, ...)`; SpiceDB requires at least one parameter.
func (p *parser) parseParams(c *ast.Caveat) bool {
	if !p.expect(tLParen, "`(` after caveat name") {
		return false
	}
	for {
		prm := &ast.Param{Pos: p.tok.pos}
		var ok bool
		if prm.Name, _, ok = p.name("caveat parameter name"); !ok {
			return false
		}
		prm.TypePos = p.tok.pos
		if prm.Type, ok = p.parseParamType(0); !ok {
			return false
		}
		c.Params = append(c.Params, prm)
		if !p.accept(tComma) {
			break
		}
	}
	return p.expect(tRParen, "`,` or `)` in caveat parameters")
}

// parseParamType parses `name` or `name<type, ...>` into its canonical spelling.
func (p *parser) parseParamType(depth int) (string, bool) {
	if p.tok.kind != tIdent {
		p.unexpected("caveat parameter type")
		return "", false
	}
	if depth > maxDepth {
		p.errorf(p.tok.pos, "caveat parameter type nested too deeply")
		return "", false
	}
	name := p.tok.text
	p.next()
	if !p.accept(tLess) {
		return name, true
	}
	var args []string
	for {
		arg, ok := p.parseParamType(depth + 1)
		if !ok {
			return "", false
		}
		args = append(args, arg)
		if !p.accept(tComma) {
			break
		}
	}
	if !p.expect(tGreater, "`>` to close the type arguments") {
		return "", false
	}
	return name + "<" + strings.Join(args, ",") + ">", true
}
