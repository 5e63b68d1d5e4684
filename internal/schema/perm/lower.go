package perm

import (
	"fmt"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/schema/ast"
)

// entityLowering is the state of lowering one entity.
type entityLowering struct {
	e       *entity
	members map[string]*member
	out     *ast.Definition
	sites   map[string]string // "rule(a,b)" -> synthetic relation name
	names   map[string]bool   // member names in use, synthetic ones included
}

func (l *lowerer) entity(e *entity) *ast.Definition {
	el := &entityLowering{
		e: e, members: map[string]*member{}, sites: map[string]string{}, names: map[string]bool{},
		out: &ast.Definition{Pos: e.pos, Name: e.name, NamePos: e.namePos},
	}
	for _, m := range e.members {
		if _, dup := el.members[m.name]; !dup {
			el.members[m.name] = m
		}
		el.names[m.name] = true
	}
	for _, m := range e.members {
		el.out.Relations = append(el.out.Relations, l.member(el, m))
	}
	return el.out
}

func (l *lowerer) member(el *entityLowering, m *member) *ast.Relation {
	r := &ast.Relation{Pos: m.pos, Name: m.name, NamePos: m.namePos}
	switch m.kind {
	case mRelation:
		r.Types = m.types
	case mAttribute:
		r.Doc = docAttribute + m.attrType
		r.Types = l.valueTypes(el.e.name, m.attrType, m.attrTypePos)
	case mPermission:
		r.IsPermission = true
		r.Expr = l.expr(el, m.expr)
	}
	return r
}

// valueTypes lists the wildcard subjects an attribute (or rule call) relation allows,
// each with caveat name: every entity type for values a permission reads, so a check
// of any subject type matches the stored wildcard, and only the owner's type otherwise.
func (l *lowerer) valueTypes(owner, attrType string, at ast.Pos) []*ast.TypeRef {
	if _, seen := l.kinds[attrType]; !seen {
		l.kinds[attrType] = at
	}
	types := []string{owner}
	if attrType == "boolean" {
		types = l.entityNames()
	}
	return wildcards(types, ValueCaveat(attrType), at)
}

func wildcards(types []string, caveat string, at ast.Pos) []*ast.TypeRef {
	out := make([]*ast.TypeRef, len(types))
	for i, t := range types {
		out[i] = &ast.TypeRef{Pos: at, Type: t, Wildcard: true, Caveat: caveat, CaveatPos: at}
	}
	return out
}

func (l *lowerer) entityNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range l.f.entities {
		if !seen[e.name] {
			seen[e.name] = true
			out = append(out, e.name)
		}
	}
	return out
}

var astOps = map[opKind]ast.BinaryOp{opOr: ast.Union, opAnd: ast.Intersection, opNot: ast.Exclusion}

func (l *lowerer) expr(el *entityLowering, x expr) ast.Expr {
	switch x := x.(type) {
	case *binary:
		return l.binary(el, x)
	case *paren:
		return &ast.Paren{Pos: x.pos, X: l.expr(el, x.x)}
	case *ident:
		if m := el.members[x.name]; m != nil && m.kind == mAttribute && m.attrType != "boolean" {
			l.errorf(x.pos, "attribute `%s` of entity `%s` is of type %s: only boolean attributes can be used directly in a permission; pass it to a rule instead", x.name, el.e.name, m.attrType)
		}
		return &ast.Ident{Pos: x.pos, Name: x.name}
	case *arrow:
		l.checkArrow(el, x)
		return &ast.Arrow{
			Tupleset: &ast.Ident{Pos: x.tupleset.pos, Name: x.tupleset.name},
			Target:   &ast.Ident{Pos: x.target.pos, Name: x.target.name},
		}
	case *call:
		return &ast.Ident{Pos: x.pos, Name: l.callSite(el, x)}
	}
	return &ast.Nil{}
}

// binary lowers x's left-nested chain in a loop: a flat `a or b or ...` of n terms is
// a chain n deep, and only right operands (terms) are lowered recursively.
func (l *lowerer) binary(el *entityLowering, x *binary) ast.Expr {
	var chain []*binary
	var leaf expr = x
	for b, ok := leaf.(*binary); ok; b, ok = leaf.(*binary) {
		chain = append(chain, b)
		leaf = b.left
	}
	acc := l.expr(el, leaf)
	for _, b := range slices.Backward(chain) {
		acc = &ast.Binary{Op: astOps[b.op], OpPos: b.opPos, Left: acc, Right: l.expr(el, b.right)}
	}
	return acc
}

// checkArrow rejects traversals the shared checker would explain badly: through an
// attribute, or onto a non-boolean attribute of the entity reached.
func (l *lowerer) checkArrow(el *entityLowering, a *arrow) {
	m := el.members[a.tupleset.name]
	if m == nil || m.kind != mRelation {
		if m != nil && m.kind == mAttribute {
			l.errorf(a.tupleset.pos, "`%s` is an attribute of entity `%s`: only relations can be followed with `.`", m.name, el.e.name)
		}
		return // unknown names and permissions are the shared checker's to report
	}
	for _, t := range m.types {
		target := l.entities[t.Type]
		if target == nil || t.Relation != "" {
			continue
		}
		for _, tm := range target.members {
			if tm.name == a.target.name && tm.kind == mAttribute && tm.attrType != "boolean" {
				l.errorf(a.target.pos, "attribute `%s` of entity `%s` is of type %s: only boolean attributes can be used in a permission", tm.name, target.name, tm.attrType)
			}
		}
	}
}

// callSite checks a rule call and returns the synthetic relation that carries it.
func (l *lowerer) callSite(el *entityLowering, c *call) string {
	r := l.rules[c.name]
	if r == nil {
		l.errorf(c.pos, "rule `%s` is not defined", c.name)
		return c.name
	}
	if len(c.args) != len(r.params) {
		l.errorf(c.pos, "rule `%s` takes %d argument(s) but is called with %d", c.name, len(r.params), len(c.args))
		return c.name
	}
	args := make([]string, len(c.args))
	for i, a := range c.args {
		args[i] = a.name
		m := el.members[a.name]
		switch {
		case m == nil || m.kind != mAttribute:
			l.errorf(a.pos, "argument `%s` of rule `%s` is not an attribute of entity `%s`", a.name, c.name, el.e.name)
		case m.attrType != r.params[i].typ:
			l.errorf(a.pos, "argument `%s` of rule `%s` is of type %s but parameter `%s` is of type %s", a.name, c.name, m.attrType, r.params[i].name, r.params[i].typ)
		}
	}
	key := c.name + "(" + strings.Join(args, ", ") + ")"
	if name, ok := el.sites[key]; ok {
		return name
	}
	name := el.siteName(c.name)
	el.sites[key] = name
	el.out.Relations = append(el.out.Relations, &ast.Relation{
		Pos: c.pos, Name: name, NamePos: c.pos,
		Doc: docCall + key, Types: wildcards(l.entityNames(), c.name, c.pos),
	})
	return name
}

// siteName picks an unused relation name for a rule call: rule_<rule>_<n>.
func (el *entityLowering) siteName(ruleName string) string {
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '_'
	}, ruleName)
	if len(base) > 48 {
		base = base[:48]
	}
	for n := 1; ; n++ {
		name := fmt.Sprintf("rule_%s_%d", base, n)
		if !el.names[name] {
			el.names[name] = true
			return name
		}
	}
}
