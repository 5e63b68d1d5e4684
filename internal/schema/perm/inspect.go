package perm

import (
	"strings"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// Info is the Permify view of a compiled schema: which relations are attributes and
// rule calls, recovered from the doc markers Compile leaves on synthetic members.
type Info struct {
	// Entities in declaration order.
	Entities []string
	// Attributes by entity, then attribute name: the Permify type ("boolean", "string[]").
	Attributes map[string]map[string]string
	// Calls by entity: the rule calls whose values the adapter maintains.
	Calls map[string][]Call
	// Rules by name.
	Rules map[string]Rule
}

// Call is one rule call in an entity's permissions, held by relation Relation.
type Call struct {
	Relation string
	Rule     string
	Args     []string // attribute names, one per rule parameter
}

// Rule is a rule's signature and body.
type Rule struct {
	Name       string
	Params     []Param // without the synthetic `context`
	Expression string
}

// Param is a rule parameter with its Permify type.
type Param struct{ Name, Type string }

// IsAttribute reports whether relation name of entity is an attribute.
func (in *Info) IsAttribute(entity, name string) bool {
	_, ok := in.Attributes[entity][name]
	return ok
}

// IsSynthetic reports whether relation name of entity exists only to carry data
// (an attribute or a rule call), so that relationship reads skip it.
func (in *Info) IsSynthetic(entity, name string) bool {
	if in.IsAttribute(entity, name) {
		return true
	}
	for _, c := range in.Calls[entity] {
		if c.Relation == name {
			return true
		}
	}
	return false
}

// Inspect recovers the Permify view of s.
func Inspect(s *ir.Schema) *Info {
	in := &Info{Attributes: map[string]map[string]string{}, Calls: map[string][]Call{}, Rules: map[string]Rule{}}
	for _, c := range s.Caveats {
		if c.Doc == docRule {
			in.Rules[c.Name] = ruleOf(c)
		}
	}
	for _, d := range s.Definitions {
		in.Entities = append(in.Entities, d.Name)
		for _, r := range d.Relations {
			inspectRelation(in, d.Name, r)
		}
	}
	return in
}

func inspectRelation(in *Info, def string, r *ir.Relation) {
	if t, ok := strings.CutPrefix(r.Doc, docAttribute); ok {
		if in.Attributes[def] == nil {
			in.Attributes[def] = map[string]string{}
		}
		in.Attributes[def][r.Name] = t
		return
	}
	sig, ok := strings.CutPrefix(r.Doc, docCall)
	if !ok {
		return
	}
	name, args, ok := strings.Cut(strings.TrimSuffix(sig, ")"), "(")
	if !ok {
		return
	}
	c := Call{Relation: r.Name, Rule: name}
	for _, a := range strings.Split(args, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.Args = append(c.Args, a)
		}
	}
	in.Calls[def] = append(in.Calls[def], c)
}

func ruleOf(c *ir.Caveat) Rule {
	r := Rule{Name: c.Name, Expression: c.Expression}
	for _, p := range c.Params {
		if p.Name == "context" {
			continue
		}
		r.Params = append(r.Params, Param{Name: p.Name, Type: permifyType(p.Type)})
	}
	return r
}

func permifyType(t caveat.Type) string {
	base := func(k caveat.Kind) string {
		return map[caveat.Kind]string{caveat.Bool: "boolean", caveat.String: "string", caveat.Int: "integer", caveat.Double: "double"}[k]
	}
	if t.Kind == caveat.List && t.Elem != nil {
		return base(t.Elem.Kind) + "[]"
	}
	return base(t.Kind)
}
