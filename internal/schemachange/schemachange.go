// Package schemachange holds the rules for replacing a schema over stored data: a new
// schema may not orphan a stored relationship, that is remove its relation or
// definition, or stop allowing the subject type, caveat, wildcard or expiration it was
// written with; and it may not remove or retype a parameter of a caveat it keeps,
// whatever is stored, since relationships' contexts were written for those types.
// SpiceDB enforces the same rules in WriteSchema.
package schemachange

import (
	"context"
	"fmt"
	"slices"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// Error refuses a schema that would leave stored relationships unreadable. Details
// name the definition, relation, subject type and an example relationship, for the
// API's error metadata.
type Error struct {
	Msg     string
	Details map[string]string
}

func (e *Error) Error() string { return e.Msg }

// Check refuses a new schema under which stored relationships would be
// orphaned: their relation (or definition) removed, or the subject type, caveat,
// wildcard or expiration trait they were written with no longer allowed. Each
// question is one filtered store query that stops at its first example, and only
// relations that changed are asked about.
func Check(ctx context.Context, r store.Reader, old, next *ir.Schema) error {
	if err := checkCaveatParams(old, next); err != nil {
		return err
	}
	for _, od := range old.Definitions {
		nd := next.Definition(od.Name)
		for _, or := range od.Relations {
			if or.IsPermission() {
				continue
			}
			if err := checkRelationChange(ctx, r, od, or, nd); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCaveatParams refuses, as SpiceDB does, a caveat kept by name whose parameter
// is removed or changes type, even with nothing stored: a relationship's context and
// a client's requests were written for the old parameters, and a check that held
// would turn conditional on a parameter no one supplies. Adding a parameter, and
// removing a whole caveat no relation allows any more, are accepted. Caveats and their
// parameters are taken in declaration order, so the first such change is reported.
func checkCaveatParams(old, next *ir.Schema) error {
	for _, oc := range old.Caveats {
		nc := next.Caveat(oc.Name)
		if nc == nil {
			continue
		}
		for _, op := range oc.Params {
			i := slices.IndexFunc(nc.Params, func(p caveat.Param) bool { return p.Name == op.Name })
			meta := map[string]string{"caveat_name": oc.Name, "parameter_name": op.Name}
			switch {
			case i < 0:
				meta["operation"] = "remove_parameter"
				return &Error{Msg: fmt.Sprintf("cannot remove parameter `%s` on caveat `%s`", op.Name, oc.Name), Details: meta}
			case nc.Params[i].Type.String() != op.Type.String():
				meta["operation"] = "change_parameter_type"
				return &Error{Msg: fmt.Sprintf("cannot change the type of parameter `%s` on caveat `%s`", op.Name, oc.Name), Details: meta}
			}
		}
	}
	return nil
}

func checkRelationChange(ctx context.Context, r store.Reader, od *ir.Definition, or *ir.Relation, nd *ir.Definition) error {
	var nr *ir.Relation
	if nd != nil {
		nr = nd.Relation(or.Name)
	}
	if nr == nil || nr.IsPermission() {
		ex, err := firstMatch(ctx, r, store.Filter{ResourceType: od.Name, Relation: or.Name}, nil)
		if err != nil || ex == nil {
			return err
		}
		return removedRelationError(od, or, nd, *ex)
	}
	for _, a := range or.Allowed {
		if nr.AllowsType(a.SubjectType) {
			continue
		}
		ex, err := firstMatch(ctx, r, allowedFilter(od.Name, or.Name, a), func(x rel.Relationship) bool { return matchesAllowed(x, a) })
		if err != nil {
			return err
		}
		if ex != nil {
			return &Error{
				Msg: fmt.Sprintf("cannot remove allowed type `%s` from relation `%s` in definition `%s`: relationship `%s` uses it; delete such relationships first",
					a.String(), or.Name, od.Name, rel.String(*ex)),
				Details: map[string]string{"operation": "remove_allowed_type", "resource_type": od.Name, "relation": or.Name, "allowed_type": a.String(), "relationship": rel.String(*ex)},
			}
		}
	}
	return nil
}

func removedRelationError(od *ir.Definition, or *ir.Relation, nd *ir.Definition, ex rel.Relationship) error {
	// SpiceDB's metadata: which change was refused, and an example of the data in
	// its way.
	meta := map[string]string{"operation": "delete_relation", "resource_type": od.Name, "relation": or.Name, "relationship": rel.String(ex)}
	var msg string
	switch {
	case nd == nil:
		meta = map[string]string{"operation": "delete_object_definition", "resource_type": od.Name, "relationship": rel.String(ex)}
		msg = fmt.Sprintf("cannot remove definition `%s`: relationship `%s` exists under its relation `%s`; delete such relationships first", od.Name, rel.String(ex), or.Name)
	case nd.Relation(or.Name) != nil:
		msg = fmt.Sprintf("cannot turn relation `%s` in definition `%s` into a permission: relationship `%s` exists under it; delete such relationships first", or.Name, od.Name, rel.String(ex))
	default:
		msg = fmt.Sprintf("cannot remove relation `%s` from definition `%s`: relationship `%s` exists under it; delete such relationships first", or.Name, od.Name, rel.String(ex))
	}
	return &Error{Msg: msg, Details: meta}
}

// firstMatch returns the first relationship matching f (and keep, when not nil), or nil.
func firstMatch(ctx context.Context, r store.Reader, f store.Filter, keep func(rel.Relationship) bool) (*rel.Relationship, error) {
	limit := 1
	if keep != nil {
		limit = 0 // the store cannot filter on caveat or expiration; scan this subject type's slice
	}
	for item, err := range r.Query(ctx, f, store.QueryOptions{Limit: limit}) {
		if err != nil {
			return nil, err
		}
		if keep == nil || keep(item.Relationship) {
			x := item.Relationship
			return &x, nil
		}
	}
	return nil, nil
}

func allowedFilter(def, relation string, a ir.AllowedSubject) store.Filter {
	sf := &store.SubjectFilter{Type: a.Type, Relation: a.Relation, RelationSet: true}
	if a.Wildcard {
		sf.IDs = []string{rel.Wildcard}
	}
	return store.Filter{ResourceType: def, Relation: relation, Subject: sf}
}

// matchesAllowed reports whether x was written under exactly the allowed entry a.
func matchesAllowed(x rel.Relationship, a ir.AllowedSubject) bool {
	caveat := ""
	if x.Caveat != nil {
		caveat = x.Caveat.Name
	}
	return x.Subject.Object.Type == a.Type && x.Subject.Relation == a.Relation &&
		(x.Subject.Object.ID == rel.Wildcard) == a.Wildcard &&
		caveat == a.Caveat && (x.Expiration != nil) == a.Expiration
}
