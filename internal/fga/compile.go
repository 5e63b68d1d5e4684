package fga

import (
	"fmt"
	"regexp"
	"slices"
	"sort"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// OpenFGA's limits on a model (its server defaults).
const (
	maxTypes     = 100
	maxModelSize = 256 * 1024
)

// OpenFGA's name rules for types, relations and conditions.
var (
	typeName      = regexp.MustCompile(`^[^:#@\*\s]{1,254}$`)
	relationName  = regexp.MustCompile(`^[^:#@\*\s]{1,50}$`)
	conditionName = regexp.MustCompile(`^[^\*\s]{1,50}$`)
)

// compiler validates one model and builds its IR; probs collects every problem.
type compiler struct {
	m      *openfgav1.AuthorizationModel
	probs  []Problem
	types  map[string]*openfgav1.TypeDefinition
	direct map[string]map[string][]*openfgav1.RelationReference
	// broken holds the relations with problems of their own, which the entrypoint
	// check takes to have one rather than report them again.
	broken map[[2]string]bool
}

func (c *compiler) add(path, format string, args ...any) {
	c.probs = append(c.probs, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Compile validates an authorization model as OpenFGA's WriteAuthorizationModel does
// and compiles it. It reports every problem it finds, each with its path in the model.
func Compile(m *openfgav1.AuthorizationModel) (*Model, []Problem) {
	if m == nil {
		return nil, []Problem{{Msg: "authorization model is empty"}}
	}
	c := &compiler{
		m: m, types: map[string]*openfgav1.TypeDefinition{},
		direct: map[string]map[string][]*openfgav1.RelationReference{}, broken: map[[2]string]bool{},
	}
	if v := m.GetSchemaVersion(); v != "1.1" && v != "1.2" {
		c.add("schema_version", "unsupported schema version %q: 1.1 (1.2 for modular models) is supported", v)
	}
	if len(m.GetTypeDefinitions()) == 0 {
		c.add("type_definitions", "a model needs at least one type definition")
	}
	if n := len(m.GetTypeDefinitions()); n > maxTypes {
		c.add("type_definitions", "the model has %d type definitions, more than the limit of %d", n, maxTypes)
	}
	if n := proto.Size(m); n > maxModelSize {
		c.add("", "the model is %d bytes, more than the limit of %d", n, maxModelSize)
	}
	c.index()
	caveats := c.conditions()
	for i, td := range m.GetTypeDefinitions() {
		c.checkType(fmt.Sprintf("type_definitions[%d]", i), td)
	}
	entry := c.entrypoints()
	for i, td := range m.GetTypeDefinitions() {
		for _, r := range sortedKeys(td.GetRelations()) {
			k := [2]string{td.GetType(), r}
			switch {
			case c.broken[k]:
			case !entry[k]:
				c.add(fmt.Sprintf("type_definitions[%d].relations.%s", i, r),
					"relation %s#%s has no entrypoint: no tuple can ever grant it (it is defined in terms of itself)", td.GetType(), r)
			case c.computedCycle(td, r, td.GetRelations()[r], map[string]bool{r: true}):
				c.add(fmt.Sprintf("type_definitions[%d].relations.%s", i, r),
					"relation %s#%s is defined in terms of itself through computed relations (a cycle)", td.GetType(), r)
			}
		}
	}
	if len(c.probs) > 0 {
		return nil, c.probs
	}
	st := newStrategies(m)
	return &Model{Proto: m, Schema: c.schema(st, caveats), direct: c.direct, graph: st.wg}, nil
}

// index records each type and its relations' type restrictions, and refuses bad or
// repeated names.
func (c *compiler) index() {
	for i, td := range c.m.GetTypeDefinitions() {
		path := fmt.Sprintf("type_definitions[%d]", i)
		name := td.GetType()
		if !typeName.MatchString(name) || name == "self" || name == "this" {
			c.add(path+".type", "invalid type name %q", name)
		}
		if _, dup := c.types[name]; dup {
			c.add(path+".type", "type %q is defined more than once", name)
			continue
		}
		c.types[name] = td
		rels := map[string][]*openfgav1.RelationReference{}
		for r := range td.GetRelations() {
			rels[r] = td.GetMetadata().GetRelations()[r].GetDirectlyRelatedUserTypes()
		}
		c.direct[name] = rels
	}
}

// conditions compiles every condition to a caveat, in name order.
func (c *compiler) conditions() []*ir.Caveat {
	names := make([]string, 0, len(c.m.GetConditions()))
	for n := range c.m.GetConditions() {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*ir.Caveat
	for _, n := range names {
		cond := c.m.GetConditions()[n]
		path := "conditions." + n
		if !conditionName.MatchString(n) {
			c.add(path, "invalid condition name %q", n)
		}
		if cond.GetName() != n {
			c.add(path+".name", "condition %q is named %q inside", n, cond.GetName())
		}
		var params []caveat.Param
		pnames := make([]string, 0, len(cond.GetParameters()))
		for p := range cond.GetParameters() {
			pnames = append(pnames, p)
		}
		sort.Strings(pnames)
		ok := true
		for _, p := range pnames {
			t, err := paramType(cond.GetParameters()[p])
			if err != nil {
				c.add(path+".parameters."+p, "%v", err)
				ok = false
				continue
			}
			params = append(params, caveat.Param{Name: p, Type: t})
		}
		if !ok {
			continue
		}
		compiled, diags := caveat.Compile(n, params, cond.GetExpression())
		for _, d := range diags {
			c.add(path+".expression", "%d:%d: %s", d.Line, d.Col, d.Msg)
		}
		if len(diags) == 0 {
			out = append(out, &ir.Caveat{Name: n, Params: params, Expression: cond.GetExpression(), Compiled: compiled})
		}
	}
	return out
}

// paramType converts a condition parameter's type.
func paramType(t *openfgav1.ConditionParamTypeRef) (caveat.Type, error) {
	var k caveat.Kind
	switch t.GetTypeName() {
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_ANY:
		k = caveat.Any
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_BOOL:
		k = caveat.Bool
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_STRING:
		k = caveat.String
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_INT:
		k = caveat.Int
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_UINT:
		k = caveat.Uint
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_DOUBLE:
		k = caveat.Double
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_DURATION:
		k = caveat.Duration
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_TIMESTAMP:
		k = caveat.Timestamp
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_IPADDRESS:
		k = caveat.IPAddress
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_MAP:
		k = caveat.Map
	case openfgav1.ConditionParamTypeRef_TYPE_NAME_LIST:
		k = caveat.List
	default:
		return caveat.Type{}, fmt.Errorf("unknown parameter type %v", t.GetTypeName())
	}
	out := caveat.Type{Kind: k}
	generic := k == caveat.Map || k == caveat.List
	switch {
	case generic && len(t.GetGenericTypes()) != 1:
		return caveat.Type{}, fmt.Errorf("%s needs exactly one generic type, found %d", k, len(t.GetGenericTypes()))
	case !generic && len(t.GetGenericTypes()) > 0:
		return caveat.Type{}, fmt.Errorf("%s takes no generic type", k)
	case generic:
		elem, err := paramType(t.GetGenericTypes()[0])
		if err != nil {
			return caveat.Type{}, err
		}
		out.Elem = &elem
	}
	return out, nil
}

// checkType validates one type's relations.
func (c *compiler) checkType(path string, td *openfgav1.TypeDefinition) {
	for _, r := range sortedKeys(td.GetRelations()) {
		before := len(c.probs)
		rpath := path + ".relations." + r
		if !relationName.MatchString(r) || r == "self" || r == "this" {
			c.add(rpath, "invalid relation name %q", r)
		}
		rw := td.GetRelations()[r]
		direct := c.direct[td.GetType()][r]
		hasThis := c.checkRewrite(rpath, td, r, rw)
		switch {
		case hasThis && len(direct) == 0:
			c.add(rpath, "relation %s#%s is assignable directly but lists no directly related user types", td.GetType(), r)
		case !hasThis && len(direct) > 0:
			c.add(rpath, "relation %s#%s lists directly related user types but is not assignable directly", td.GetType(), r)
		}
		c.checkDirect(path+".metadata.relations."+r, direct)
		if len(c.probs) > before {
			c.broken[[2]string{td.GetType(), r}] = true
		}
	}
	for r := range td.GetMetadata().GetRelations() {
		if _, ok := td.GetRelations()[r]; !ok {
			c.add(path+".metadata.relations."+r, "metadata names relation %q, which type %q does not define", r, td.GetType())
		}
	}
}

// checkDirect validates a relation's type restrictions.
func (c *compiler) checkDirect(path string, refs []*openfgav1.RelationReference) {
	seen := map[string]bool{}
	for i, ref := range refs {
		p := fmt.Sprintf("%s.directly_related_user_types[%d]", path, i)
		rels, ok := c.direct[ref.GetType()]
		if !ok {
			c.add(p, "type %q is not defined", ref.GetType())
			continue
		}
		if rr := ref.GetRelation(); rr != "" {
			if _, ok := rels[rr]; !ok {
				c.add(p, "relation %s#%s is not defined", ref.GetType(), rr)
			}
		}
		if cn := ref.GetCondition(); cn != "" {
			if _, ok := c.m.GetConditions()[cn]; !ok {
				c.add(p, "condition %q is not defined", cn)
			}
		}
		k := refString(ref)
		if seen[k] {
			c.add(p, "%s is listed more than once", k)
		}
		seen[k] = true
	}
}

// checkRewrite validates a rewrite of relation r on td and reports whether it
// contains `this`.
func (c *compiler) checkRewrite(path string, td *openfgav1.TypeDefinition, r string, u *openfgav1.Userset) bool {
	rels := c.direct[td.GetType()]
	switch x := u.GetUserset().(type) {
	case *openfgav1.Userset_This:
		return true
	case *openfgav1.Userset_ComputedUserset:
		cr := x.ComputedUserset.GetRelation()
		if _, ok := rels[cr]; !ok {
			c.add(path, "relation %s#%s refers to undefined relation %q", td.GetType(), r, cr)
		}
	case *openfgav1.Userset_TupleToUserset:
		c.checkTTU(path, td, r, x.TupleToUserset)
	case *openfgav1.Userset_Union:
		return c.checkChildren(path, td, r, x.Union.GetChild())
	case *openfgav1.Userset_Intersection:
		return c.checkChildren(path, td, r, x.Intersection.GetChild())
	case *openfgav1.Userset_Difference:
		if x.Difference.GetBase() == nil || x.Difference.GetSubtract() == nil {
			c.add(path, "relation %s#%s has a difference without a base or a subtract", td.GetType(), r)
			return false
		}
		a := c.checkRewrite(path, td, r, x.Difference.GetBase())
		b := c.checkRewrite(path, td, r, x.Difference.GetSubtract())
		return a || b
	default:
		c.add(path, "relation %s#%s has an empty definition", td.GetType(), r)
	}
	return false
}

func (c *compiler) checkChildren(path string, td *openfgav1.TypeDefinition, r string, children []*openfgav1.Userset) bool {
	if len(children) == 0 {
		c.add(path, "relation %s#%s has an operator without operands", td.GetType(), r)
	}
	this := false
	for _, ch := range children {
		this = c.checkRewrite(path, td, r, ch) || this
	}
	return this
}

// checkTTU validates `x from y`: y is a relation of the type assignable directly to
// objects only (no subject sets, no wildcards), and x exists on at least one of them.
func (c *compiler) checkTTU(path string, td *openfgav1.TypeDefinition, r string, t *openfgav1.TupleToUserset) {
	ts, target := t.GetTupleset().GetRelation(), t.GetComputedUserset().GetRelation()
	rw, ok := td.GetRelations()[ts]
	if !ok {
		c.add(path, "relation %s#%s: `%s from %s` walks undefined relation %q", td.GetType(), r, target, ts, ts)
		return
	}
	if _, this := rw.GetUserset().(*openfgav1.Userset_This); !this {
		c.add(path, "relation %s#%s: `%s from %s`: %s must be assignable directly only ([types] alone)", td.GetType(), r, target, ts, ts)
	}
	found := false
	for _, ref := range c.direct[td.GetType()][ts] {
		if ref.GetRelation() != "" || ref.GetWildcard() != nil {
			c.add(path, "relation %s#%s: `%s from %s`: %s may not allow %s (only objects, no subject sets or wildcards)", td.GetType(), r, target, ts, ts, refString(ref))
			continue
		}
		if _, ok := c.direct[ref.GetType()][target]; ok {
			found = true
		}
	}
	if !found {
		c.add(path, "relation %s#%s: `%s from %s`: no type that %s allows has relation %q", td.GetType(), r, target, ts, ts, target)
	}
}

// entrypoints returns the relations some tuple can grant: those with a path to a
// directly assignable object or wildcard, through both sides of a `but not`. It is
// the least fixpoint of the rewrites (a relation met again on a path contributes
// nothing until shown to have one), found by iterating until nothing changes. Relations with problems of their own
// count as having one, so as not to be reported twice.
func (c *compiler) entrypoints() map[[2]string]bool {
	has := map[[2]string]bool{}
	for k := range c.broken {
		has[k] = true
	}
	for changed := true; changed; {
		changed = false
		for typ, td := range c.types {
			for r, rw := range td.GetRelations() {
				k := [2]string{typ, r}
				if !has[k] && c.rewriteEntry(typ, r, rw, has) {
					has[k], changed = true, true
				}
			}
		}
	}
	return has
}

// rewriteEntry reports whether rewrite u of relation r on typ has an entrypoint,
// given the relations known to have one.
func (c *compiler) rewriteEntry(typ, r string, u *openfgav1.Userset, has map[[2]string]bool) bool {
	known := func(t, rel string) bool {
		if _, ok := c.direct[t][rel]; !ok {
			return true // an undefined relation is reported already
		}
		return has[[2]string{t, rel}]
	}
	switch x := u.GetUserset().(type) {
	case *openfgav1.Userset_This:
		for _, ref := range c.direct[typ][r] {
			if ref.GetRelation() == "" || known(ref.GetType(), ref.GetRelation()) {
				return true
			}
		}
	case *openfgav1.Userset_ComputedUserset:
		return known(typ, x.ComputedUserset.GetRelation())
	case *openfgav1.Userset_TupleToUserset:
		target := x.TupleToUserset.GetComputedUserset().GetRelation()
		for _, ref := range c.direct[typ][x.TupleToUserset.GetTupleset().GetRelation()] {
			if _, ok := c.direct[ref.GetType()][target]; ok && has[[2]string{ref.GetType(), target}] {
				return true
			}
		}
	case *openfgav1.Userset_Union:
		return slices.ContainsFunc(x.Union.GetChild(), func(ch *openfgav1.Userset) bool { return c.rewriteEntry(typ, r, ch, has) })
	case *openfgav1.Userset_Intersection:
		return !slices.ContainsFunc(x.Intersection.GetChild(), func(ch *openfgav1.Userset) bool { return !c.rewriteEntry(typ, r, ch, has) })
	case *openfgav1.Userset_Difference:
		// OpenFGA asks an entrypoint of the subtracted side too.
		return c.rewriteEntry(typ, r, x.Difference.GetBase(), has) && c.rewriteEntry(typ, r, x.Difference.GetSubtract(), has)
	}
	return false
}

// computedCycle reports whether rewrite u leads back to a relation of path (on td)
// through computed relations alone, as OpenFGA refuses: `define a: [user] or b`,
// `define b: a`. Directly assigned tuples and `x from y` end a path.
func (c *compiler) computedCycle(td *openfgav1.TypeDefinition, r string, u *openfgav1.Userset, path map[string]bool) bool {
	switch x := u.GetUserset().(type) {
	case *openfgav1.Userset_ComputedUserset:
		next := x.ComputedUserset.GetRelation()
		if path[next] {
			return true
		}
		rw, ok := td.GetRelations()[next]
		if !ok {
			return false
		}
		path[next] = true
		defer delete(path, next)
		return c.computedCycle(td, next, rw, path)
	case *openfgav1.Userset_Union:
		return slices.ContainsFunc(x.Union.GetChild(), func(ch *openfgav1.Userset) bool { return c.computedCycle(td, r, ch, path) })
	case *openfgav1.Userset_Intersection:
		return slices.ContainsFunc(x.Intersection.GetChild(), func(ch *openfgav1.Userset) bool { return c.computedCycle(td, r, ch, path) })
	case *openfgav1.Userset_Difference:
		return c.computedCycle(td, r, x.Difference.GetBase(), path) || c.computedCycle(td, r, x.Difference.GetSubtract(), path)
	}
	return false
}

// refString spells a type restriction as the DSL does: user, user:*, group#member,
// each optionally `with cond`.
func refString(ref *openfgav1.RelationReference) string {
	s := ref.GetType()
	switch {
	case ref.GetWildcard() != nil:
		s += ":*"
	case ref.GetRelation() != "":
		s += "#" + ref.GetRelation()
	}
	if ref.GetCondition() != "" {
		s += " with " + ref.GetCondition()
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
