package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// Schema reflection: ReflectSchema, ComputablePermissions, DependentRelations and
// DiffSchema, all computed from the compiled IR of the schema at the requested revision.

// schemaAt returns the compiled schema a reflection call reads, and its token.
func (s *Server) schemaAt(ctx context.Context, c *v1.Consistency) (*ir.Schema, *v1.ZedToken, error) {
	r, sch, err := s.readerAndSchema(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if len(sch.Definitions) == 0 && len(sch.Caveats) == 0 {
		return nil, nil, &noSchemaError{}
	}
	return sch, tokenFor(r.Revision()), nil
}

func (ss *schemaService) ReflectSchema(ctx context.Context, req *v1.ReflectSchemaRequest) (*v1.ReflectSchemaResponse, error) {
	sch, at, err := ss.s.schemaAt(ctx, req.GetConsistency())
	if err != nil {
		return nil, ss.s.status(err)
	}
	resp := &v1.ReflectSchemaResponse{ReadAt: at}
	filters := req.GetOptionalFilters()
	for _, d := range sch.Definitions {
		if def := reflectDefinition(d, filters); def != nil {
			resp.Definitions = append(resp.Definitions, def)
		}
	}
	for _, c := range sch.Caveats {
		if caveatSelected(c.Name, filters) {
			resp.Caveats = append(resp.Caveats, reflectCaveat(c))
		}
	}
	// In SpiceDB's order, by name, whatever the order of the stored text (a schema
	// written through the Permify API or by an earlier version keeps its own).
	slices.SortFunc(resp.Definitions, func(a, b *v1.ReflectionDefinition) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(resp.Caveats, func(a, b *v1.ReflectionCaveat) int { return strings.Compare(a.Name, b.Name) })
	return resp, nil
}

// reflectDefinition returns d's reflection restricted by filters (nil when no filter
// selects it). With no filters everything is selected; a filter selects the definitions
// whose names start with its definition prefix, and within them the relations and
// permissions starting with its relation or permission prefix (all when it names neither).
func reflectDefinition(d *ir.Definition, filters []*v1.ReflectionSchemaFilter) *v1.ReflectionDefinition {
	out := &v1.ReflectionDefinition{Name: d.Name, Comment: d.Doc}
	selected := len(filters) == 0
	for _, f := range filters {
		if f.GetOptionalCaveatNameFilter() != "" && f.GetOptionalDefinitionNameFilter() == "" {
			continue
		}
		if strings.HasPrefix(d.Name, f.GetOptionalDefinitionNameFilter()) {
			selected = true
		}
	}
	if !selected {
		return nil
	}
	for _, r := range d.Relations {
		if !memberSelected(d.Name, r, filters) {
			continue
		}
		if r.IsPermission() {
			out.Permissions = append(out.Permissions, reflectPermission(r))
		} else {
			out.Relations = append(out.Relations, reflectRelation(r))
		}
	}
	return out
}

func memberSelected(def string, r *ir.Relation, filters []*v1.ReflectionSchemaFilter) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if !strings.HasPrefix(def, f.GetOptionalDefinitionNameFilter()) || f.GetOptionalCaveatNameFilter() != "" && f.GetOptionalDefinitionNameFilter() == "" {
			continue
		}
		relF, permF := f.GetOptionalRelationNameFilter(), f.GetOptionalPermissionNameFilter()
		switch {
		case relF == "" && permF == "":
			return true
		case r.IsPermission() && permF != "" && strings.HasPrefix(r.Name, permF):
			return true
		case !r.IsPermission() && relF != "" && strings.HasPrefix(r.Name, relF):
			return true
		}
	}
	return false
}

func caveatSelected(name string, filters []*v1.ReflectionSchemaFilter) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if c := f.GetOptionalCaveatNameFilter(); c != "" && strings.HasPrefix(name, c) {
			return true
		}
	}
	return false
}

func reflectRelation(r *ir.Relation) *v1.ReflectionRelation {
	out := &v1.ReflectionRelation{Name: r.Name, Comment: r.Doc, ParentDefinitionName: r.Def.Name}
	for _, a := range r.Allowed {
		out.SubjectTypes = append(out.SubjectTypes, reflectTypeRef(a))
	}
	return out
}

func reflectTypeRef(a ir.AllowedSubject) *v1.ReflectionTypeReference {
	t := &v1.ReflectionTypeReference{SubjectDefinitionName: a.Type, OptionalCaveatName: a.Caveat}
	switch {
	case a.Wildcard:
		t.Typeref = &v1.ReflectionTypeReference_IsPublicWildcard{IsPublicWildcard: true}
	case a.Relation != "":
		t.Typeref = &v1.ReflectionTypeReference_OptionalRelationName{OptionalRelationName: a.Relation}
	default:
		// SpiceDB (through 1.56 at least) sets this field but always to false, whatever
		// the subject type; clients that read it see what SpiceDB sends.
		t.Typeref = &v1.ReflectionTypeReference_IsTerminalSubject{IsTerminalSubject: false}
	}
	return t
}

func reflectPermission(r *ir.Relation) *v1.ReflectionPermission {
	return &v1.ReflectionPermission{Name: r.Name, Comment: r.Doc, ParentDefinitionName: r.Def.Name}
}

func reflectCaveat(c *ir.Caveat) *v1.ReflectionCaveat {
	out := &v1.ReflectionCaveat{Name: c.Name, Comment: c.Doc, Expression: schema.CaveatExpression(c)}
	for _, p := range c.Params {
		out.Parameters = append(out.Parameters, &v1.ReflectionCaveatParameter{Name: p.Name, Type: p.Type.String(), ParentCaveatName: c.Name})
	}
	slices.SortFunc(out.Parameters, func(a, b *v1.ReflectionCaveatParameter) int { return strings.Compare(a.Name, b.Name) }) // as SpiceDB
	return out
}

// dependencies lists what computing r reads directly: the relations and permissions
// its rewrite names (an arrow reads its tupleset, and its target on every subject type
// of the tupleset), and for a relation, the subject relations (group#member) it allows.
func dependencies(s *ir.Schema, r *ir.Relation) []*ir.Relation {
	var out []*ir.Relation
	if !r.IsPermission() {
		for _, a := range r.Allowed {
			if d := s.Definition(a.Type); d != nil && a.Relation != "" {
				if sr := d.Relation(a.Relation); sr != nil {
					out = append(out, sr)
				}
			}
		}
		return out
	}
	var walk func(x *ir.Expr)
	walk = func(x *ir.Expr) {
		switch x.Kind {
		case ir.Ref:
			if t := r.Def.Relation(x.Name); t != nil {
				out = append(out, t)
			}
		case ir.Arrow:
			ts := r.Def.Relation(x.Tupleset)
			if ts == nil {
				return
			}
			out = append(out, ts)
			for _, a := range ts.Allowed {
				if d := s.Definition(a.Type); d != nil {
					if t := d.Relation(x.Target); t != nil {
						out = append(out, t)
					}
				}
			}
		default:
			for _, c := range x.Children {
				walk(c)
			}
		}
	}
	walk(r.Rewrite)
	return out
}

// closure walks next from start (excluded) and returns every relation reached.
func closure(start *ir.Relation, next func(*ir.Relation) []*ir.Relation) []*ir.Relation {
	seen := map[*ir.Relation]bool{start: true}
	queue := []*ir.Relation{start}
	var out []*ir.Relation
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		for _, n := range next(r) {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
				queue = append(queue, n)
			}
		}
	}
	slices.SortFunc(out, func(a, b *ir.Relation) int {
		return cmp.Or(cmp.Compare(a.Def.Name, b.Def.Name), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func relationRefs(rs []*ir.Relation, keep func(*ir.Relation) bool) []*v1.ReflectionRelationReference {
	var out []*v1.ReflectionRelationReference
	for _, r := range rs {
		if keep(r) {
			out = append(out, &v1.ReflectionRelationReference{DefinitionName: r.Def.Name, RelationName: r.Name, IsPermission: r.IsPermission()})
		}
	}
	return out
}

// lookupRelation finds def#name or says what is missing.
func lookupRelation(s *ir.Schema, def, name string) (*ir.Relation, error) {
	d := s.Definition(def)
	if d == nil {
		return nil, &reflectUnknownDefinitionError{def}
	}
	r := d.Relation(name)
	if r == nil {
		return nil, &ir.UnknownRelationError{Definition: def, Name: name}
	}
	return r, nil
}

// notAPermissionError: DependentRelations was asked about a relation.
type notAPermissionError struct{ definition, relation string }

func (e *notAPermissionError) Error() string {
	return fmt.Sprintf("the relation `%s` is not a permission: `%s#%s` is a relation, and only permissions depend on other relations", e.relation, e.definition, e.relation)
}

// reflectUnknownDefinitionError: a reflection call named a definition the schema does
// not have. SpiceDB reports it as a schema type error, not as an unknown definition.
type reflectUnknownDefinitionError struct{ name string }

func (e *reflectUnknownDefinitionError) Error() string {
	return fmt.Sprintf("object definition `%s` not found", e.name)
}

// ComputablePermissions lists every relation and permission whose value is computed,
// directly or not, from the given relation.
func (ss *schemaService) ComputablePermissions(ctx context.Context, req *v1.ComputablePermissionsRequest) (*v1.ComputablePermissionsResponse, error) {
	sch, at, err := ss.s.schemaAt(ctx, req.GetConsistency())
	if err != nil {
		return nil, ss.s.status(err)
	}
	start, err := lookupRelation(sch, req.GetDefinitionName(), req.GetRelationName())
	if err != nil {
		return nil, ss.s.status(err)
	}
	dependents := map[*ir.Relation][]*ir.Relation{}
	for _, d := range sch.Definitions {
		for _, r := range d.Relations {
			for _, dep := range dependencies(sch, r) {
				dependents[dep] = append(dependents[dep], r)
			}
		}
	}
	found := closure(start, func(r *ir.Relation) []*ir.Relation { return dependents[r] })
	prefix := req.GetOptionalDefinitionNameFilter()
	return &v1.ComputablePermissionsResponse{ReadAt: at, Permissions: relationRefs(found, func(r *ir.Relation) bool {
		return strings.HasPrefix(r.Def.Name, prefix)
	})}, nil
}

// DependentRelations lists every relation and permission a permission is computed from.
func (ss *schemaService) DependentRelations(ctx context.Context, req *v1.DependentRelationsRequest) (*v1.DependentRelationsResponse, error) {
	sch, at, err := ss.s.schemaAt(ctx, req.GetConsistency())
	if err != nil {
		return nil, ss.s.status(err)
	}
	start, err := lookupRelation(sch, req.GetDefinitionName(), req.GetPermissionName())
	if err != nil {
		return nil, ss.s.status(err)
	}
	if !start.IsPermission() {
		return nil, ss.s.status(&notAPermissionError{start.Def.Name, start.Name})
	}
	found := closure(start, func(r *ir.Relation) []*ir.Relation { return dependencies(sch, r) })
	return &v1.DependentRelationsResponse{ReadAt: at, Relations: relationRefs(found, func(*ir.Relation) bool { return true })}, nil
}

// DiffSchema compares the stored schema with comparison_schema: what the comparison
// adds, removes or changes.
func (ss *schemaService) DiffSchema(ctx context.Context, req *v1.DiffSchemaRequest) (*v1.DiffSchemaResponse, error) {
	sch, at, err := ss.s.schemaAt(ctx, req.GetConsistency())
	if err != nil {
		return nil, ss.s.status(err)
	}
	other, err := schema.CompileContext(ctx, req.GetComparisonSchema())
	if err != nil {
		return nil, ss.s.status(err)
	}
	return &v1.DiffSchemaResponse{ReadAt: at, Diffs: diffSchemas(sch, other)}, nil
}

func diffSchemas(old, cur *ir.Schema) []*v1.ReflectionSchemaDiff {
	var out []*v1.ReflectionSchemaDiff
	for _, d := range old.Definitions {
		if cur.Definition(d.Name) == nil {
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_DefinitionRemoved{DefinitionRemoved: reflectDefinition(d, nil)}})
		}
	}
	for _, d := range cur.Definitions {
		od := old.Definition(d.Name)
		if od == nil {
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_DefinitionAdded{DefinitionAdded: reflectDefinition(d, nil)}})
			continue
		}
		if od.Doc != d.Doc {
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_DefinitionDocCommentChanged{DefinitionDocCommentChanged: reflectDefinition(d, nil)}})
		}
		out = append(out, diffMembers(od, d)...)
	}
	for _, c := range old.Caveats {
		if cur.Caveat(c.Name) == nil {
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_CaveatRemoved{CaveatRemoved: reflectCaveat(c)}})
		}
	}
	for _, c := range cur.Caveats {
		oc := old.Caveat(c.Name)
		if oc == nil {
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_CaveatAdded{CaveatAdded: reflectCaveat(c)}})
			continue
		}
		out = append(out, diffCaveat(oc, c)...)
	}
	return out
}

func diffMembers(od, d *ir.Definition) []*v1.ReflectionSchemaDiff {
	var out []*v1.ReflectionSchemaDiff
	removed := func(r *ir.Relation) *v1.ReflectionSchemaDiff {
		if r.IsPermission() {
			return &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_PermissionRemoved{PermissionRemoved: reflectPermission(r)}}
		}
		return &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_RelationRemoved{RelationRemoved: reflectRelation(r)}}
	}
	added := func(r *ir.Relation) *v1.ReflectionSchemaDiff {
		if r.IsPermission() {
			return &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_PermissionAdded{PermissionAdded: reflectPermission(r)}}
		}
		return &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_RelationAdded{RelationAdded: reflectRelation(r)}}
	}
	for _, r := range od.Relations {
		if n := d.Relation(r.Name); n == nil || n.IsPermission() != r.IsPermission() {
			out = append(out, removed(r))
		}
	}
	for _, r := range d.Relations {
		o := od.Relation(r.Name)
		if o == nil || o.IsPermission() != r.IsPermission() {
			out = append(out, added(r))
			continue
		}
		if r.IsPermission() {
			if o.Doc != r.Doc {
				out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_PermissionDocCommentChanged{PermissionDocCommentChanged: reflectPermission(r)}})
			}
			if schema.FormatExpr(o.Rewrite) != schema.FormatExpr(r.Rewrite) {
				out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_PermissionExprChanged{PermissionExprChanged: reflectPermission(r)}})
			}
			continue
		}
		if o.Doc != r.Doc {
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_RelationDocCommentChanged{RelationDocCommentChanged: reflectRelation(r)}})
		}
		for _, a := range o.Allowed {
			if !r.AllowsType(a.SubjectType) {
				out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_RelationSubjectTypeRemoved{RelationSubjectTypeRemoved: &v1.ReflectionRelationSubjectTypeChange{
					Relation: reflectRelation(r), ChangedSubjectType: reflectTypeRef(a),
				}}})
			}
		}
		for _, a := range r.Allowed {
			if !o.AllowsType(a.SubjectType) {
				out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_RelationSubjectTypeAdded{RelationSubjectTypeAdded: &v1.ReflectionRelationSubjectTypeChange{
					Relation: reflectRelation(r), ChangedSubjectType: reflectTypeRef(a),
				}}})
			}
		}
	}
	return out
}

func diffCaveat(oc, c *ir.Caveat) []*v1.ReflectionSchemaDiff {
	var out []*v1.ReflectionSchemaDiff
	rc := reflectCaveat(c)
	if oc.Doc != c.Doc {
		out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_CaveatDocCommentChanged{CaveatDocCommentChanged: rc}})
	}
	if schema.CaveatExpression(oc) != schema.CaveatExpression(c) {
		out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_CaveatExprChanged{CaveatExprChanged: rc}})
	}
	param := func(c *ir.Caveat, name string) (string, bool) {
		for _, p := range c.Params {
			if p.Name == name {
				return p.Type.String(), true
			}
		}
		return "", false
	}
	for _, p := range reflectCaveat(oc).Parameters {
		if _, ok := param(c, p.Name); !ok {
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_CaveatParameterRemoved{CaveatParameterRemoved: p}})
		}
	}
	for _, p := range rc.Parameters {
		prev, ok := param(oc, p.Name)
		switch {
		case !ok:
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_CaveatParameterAdded{CaveatParameterAdded: p}})
		case prev != p.Type:
			out = append(out, &v1.ReflectionSchemaDiff{Diff: &v1.ReflectionSchemaDiff_CaveatParameterTypeChanged{CaveatParameterTypeChanged: &v1.ReflectionCaveatParameterTypeChange{
				Parameter: p, PreviousType: prev,
			}}})
		}
	}
	return out
}
