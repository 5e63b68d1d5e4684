package permify

import (
	"strings"

	"github.com/latch-authz/latch/internal/schema/ir"
)

// schemaJSON renders a schema in the shape of Permify's schemas/read answer: entity
// definitions with relations, permissions (as rewrite trees), attributes and
// references, and rule definitions. Synthetic rule-call relations appear as calls.
func schemaJSON(v *view) map[string]any {
	entities := map[string]any{}
	refs := map[string]string{}
	for _, d := range v.IR.Definitions {
		entities[d.Name] = entityJSON(v, d)
		refs[d.Name] = "REFERENCE_ENTITY"
	}
	rules := map[string]any{}
	for name, r := range v.Info.Rules {
		args := map[string]string{}
		for _, p := range r.Params {
			args[p.Name] = attributeTypeEnum(p.Type)
		}
		rules[name] = map[string]any{"name": name, "arguments": args, "expression": r.Expression}
		refs[name] = "REFERENCE_RULE"
	}
	return map[string]any{"entity_definitions": entities, "rule_definitions": rules, "references": refs}
}

func entityJSON(v *view, d *ir.Definition) map[string]any {
	relations, perms, attrs, refs := map[string]any{}, map[string]any{}, map[string]any{}, map[string]string{}
	for _, r := range d.Relations {
		switch {
		case v.Info.IsAttribute(d.Name, r.Name):
			attrs[r.Name] = map[string]any{"name": r.Name, "type": attributeTypeEnum(v.Info.Attributes[d.Name][r.Name])}
			refs[r.Name] = "REFERENCE_ATTRIBUTE"
		case v.Info.IsSynthetic(d.Name, r.Name):
		case r.IsPermission():
			perms[r.Name] = map[string]any{"name": r.Name, "child": childJSON(v, d, r.Rewrite)}
			refs[r.Name] = "REFERENCE_PERMISSION"
		default:
			var types []map[string]string
			for _, a := range r.Allowed {
				types = append(types, map[string]string{"type": a.Type, "relation": a.Relation})
			}
			relations[r.Name] = map[string]any{"name": r.Name, "relation_references": types}
			refs[r.Name] = "REFERENCE_RELATION"
		}
	}
	return map[string]any{"name": d.Name, "relations": relations, "permissions": perms, "attributes": attrs, "references": refs}
}

var rewriteOps = map[ir.ExprKind]string{ir.Union: "OPERATION_UNION", ir.Intersection: "OPERATION_INTERSECTION", ir.Exclusion: "OPERATION_EXCLUSION"}

func childJSON(v *view, d *ir.Definition, x *ir.Expr) map[string]any {
	switch x.Kind {
	case ir.Union, ir.Intersection, ir.Exclusion:
		children := make([]any, len(x.Children))
		for i, c := range x.Children {
			children[i] = childJSON(v, d, c)
		}
		return map[string]any{"rewrite": map[string]any{"rewrite_operation": rewriteOps[x.Kind], "children": children}}
	case ir.Arrow:
		return map[string]any{"leaf": map[string]any{"tuple_to_user_set": map[string]any{
			"tupleSet": map[string]string{"relation": x.Tupleset}, "computed": map[string]string{"relation": x.Target},
		}}}
	case ir.Ref:
		if v.Info.IsAttribute(d.Name, x.Name) {
			return map[string]any{"leaf": map[string]any{"computed_attribute": map[string]string{"name": x.Name}}}
		}
		for _, c := range v.Info.Calls[d.Name] {
			if c.Relation == x.Name {
				args := make([]any, len(c.Args))
				for i, a := range c.Args {
					args[i] = map[string]any{"computed_attribute": map[string]string{"name": a}}
				}
				return map[string]any{"leaf": map[string]any{"call": map[string]any{"rule_name": c.Rule, "arguments": args}}}
			}
		}
		return map[string]any{"leaf": map[string]any{"computed_user_set": map[string]string{"relation": x.Name}}}
	}
	return map[string]any{}
}

// attributeTypeEnum spells a Permify type as its API enum: "string[]" is
// ATTRIBUTE_TYPE_STRING_ARRAY.
func attributeTypeEnum(t string) string {
	base, isList := strings.CutSuffix(t, "[]")
	e := "ATTRIBUTE_TYPE_" + strings.ToUpper(base)
	if isList {
		e += "_ARRAY"
	}
	return e
}
