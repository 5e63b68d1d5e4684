package fga

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// ListUsers answers OpenFGA's ListUsers on r (from m.Reader): for each filter, the
// users of its type (`user:anne`, and `user:*` when the wildcard has the relation) or
// of its subject set (`group:eng#member`) that have relation on object. Users are in
// filter order, each filter's sorted, wildcard first.
//
// OpenFGA's ListUsers is not its Check run backwards but a walk of its own, and its
// answers are what clients see, so this walks as it does (usersWalk): it reads every
// tuple of each object and relation it expands and fails when any of their conditions
// lacks a parameter, whether or not that tuple leads to a user of the filter; it
// names the objects of a direct tuple whenever their type is the filter's, even for a
// subject set filter; and it combines the operands of `and` and `but not` by its
// rules for wildcards and excluded users.
func ListUsers(ctx context.Context, m *Model, r store.Reader, object rel.ObjectRef, relation string, filters []*openfgav1.UserTypeFilter, reqCtx map[string]any) ([]*openfgav1.User, error) {
	if err := m.validateTarget(object.Type, relation); err != nil {
		return nil, err
	}
	var out []*openfgav1.User
	for _, f := range filters {
		if err := m.validateUser(rel.SubjectRef{Object: rel.ObjectRef{Type: f.GetType()}, Relation: f.GetRelation()}); err != nil {
			return nil, err
		}
		users, err := usersOf(ctx, m, r, object, relation, f, reqCtx)
		if err != nil {
			return nil, err
		}
		out = append(out, users...)
	}
	return out, nil
}

// usersOf answers ListUsers for one filter.
func usersOf(ctx context.Context, m *Model, r store.Reader, object rel.ObjectRef, relation string, f *openfgav1.UserTypeFilter, reqCtx map[string]any) ([]*openfgav1.User, error) {
	w := usersWalk{m: m, r: r, filter: f, reqCtx: reqCtx, types: m.types()}
	if (object.Type != f.GetType() || relation != f.GetRelation()) && !w.reaches(object.Type, relation, map[string]bool{}) {
		return nil, nil
	}
	found, _, err := w.expand(ctx, node{object: object, relation: relation, visited: map[string]bool{}})
	if err != nil {
		return nil, w.walkError(err)
	}
	status := map[string]bool{}
	for _, u := range found {
		status[u.key] = u.has
	}
	var keys []string
	for k, has := range status {
		if has {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		wa, wb := strings.HasSuffix(a, ":"+rel.Wildcard), strings.HasSuffix(b, ":"+rel.Wildcard)
		switch {
		case wa != wb && wa:
			return -1
		case wa != wb:
			return 1
		}
		return strings.Compare(a, b)
	})
	out := make([]*openfgav1.User, 0, len(keys))
	for _, k := range keys {
		out = append(out, userOfKey(k))
	}
	return out, nil
}

// reaches reports whether a user of the filter can have relation on typ at all, as
// OpenFGA's pruning decides before it reads anything: through direct types, subject
// sets, computed relations and `x from y`, through every operand of `or`, the first
// of `and` and the base of `but not`. visited holds the relations already followed.
func (w *usersWalk) reaches(typ, relation string, visited map[string]bool) bool {
	key := typ + "#" + relation
	if visited[key] {
		return false
	}
	visited[key] = true
	return w.rewriteReaches(typ, relation, w.types[typ].GetRelations()[relation], visited)
}

func (w *usersWalk) rewriteReaches(typ, relation string, u *openfgav1.Userset, visited map[string]bool) bool {
	m, f := w.m, w.filter
	switch us := u.GetUserset().(type) {
	case *openfgav1.Userset_This:
		direct, _ := m.Relation(typ, relation)
		for _, ref := range direct {
			if ref.GetType() != f.GetType() {
				continue
			}
			if ref.GetWildcard() != nil || ref.GetRelation() == f.GetRelation() {
				return true
			}
		}
		for _, ref := range direct {
			if ref.GetRelation() != "" && w.reaches(ref.GetType(), ref.GetRelation(), visited) {
				return true
			}
		}
	case *openfgav1.Userset_ComputedUserset:
		to := us.ComputedUserset.GetRelation()
		return (typ == f.GetType() && to == f.GetRelation()) || w.reaches(typ, to, visited)
	case *openfgav1.Userset_TupleToUserset:
		to := us.TupleToUserset.GetComputedUserset().GetRelation()
		tupleset, _ := m.Relation(typ, us.TupleToUserset.GetTupleset().GetRelation())
		for _, ref := range tupleset {
			if _, ok := m.Relation(ref.GetType(), to); !ok {
				continue
			}
			if (ref.GetType() == f.GetType() && to == f.GetRelation()) || w.reaches(ref.GetType(), to, visited) {
				return true
			}
		}
	case *openfgav1.Userset_Union:
		for _, c := range us.Union.GetChild() {
			if w.rewriteReaches(typ, relation, c, visited) {
				return true
			}
		}
	case *openfgav1.Userset_Intersection:
		return w.rewriteReaches(typ, relation, us.Intersection.GetChild()[0], visited)
	case *openfgav1.Userset_Difference:
		return w.rewriteReaches(typ, relation, us.Difference.GetBase(), visited)
	}
	return false
}

// found is one user a step of the walk reports: has false reports the user as
// without the relation (a `but not` decided it), excluded the users an operand below
// excluded, which an `and` or `or` above takes into account.
type found struct {
	key      string // `type:id`, `type:*` or `type:id#relation`
	has      bool
	excluded []string
}

// node is one object and relation the walk expands; visited holds the ones on the
// path to it (a node met again on its path is a cycle), depth their number.
type node struct {
	object   rel.ObjectRef
	relation string
	visited  map[string]bool
	depth    int
}

// usersWalk is one filter's ListUsers walk.
type usersWalk struct {
	m      *Model
	r      store.Reader
	filter *openfgav1.UserTypeFilter
	reqCtx map[string]any
	types  map[string]*openfgav1.TypeDefinition
}

// expand reports the users of n; cycle is true when n closes a cycle.
func (w *usersWalk) expand(ctx context.Context, n node) (out []found, cycle bool, err error) {
	if n.depth >= engine.OpenFGAMaxDepth {
		return nil, false, engine.ErrMaxDepth
	}
	n.depth++
	key := n.object.Type + ":" + n.object.ID + "#" + n.relation
	if n.visited[key] {
		return nil, true, nil
	}
	n.visited[key] = true
	if n.object.Type == w.filter.GetType() && n.relation == w.filter.GetRelation() {
		out = append(out, found{key: key, has: true})
	}
	u, ok := w.types[n.object.Type].GetRelations()[n.relation]
	if !ok {
		return out, false, nil
	}
	more, cycle, err := w.rewrite(ctx, n, u)
	return append(out, more...), cycle, err
}

// dispatch expands another object and relation from n, on a copy of n's path.
func (w *usersWalk) dispatch(ctx context.Context, n node, object rel.ObjectRef, relation string) ([]found, bool, error) {
	return w.expand(ctx, node{object: object, relation: relation, visited: maps.Clone(n.visited), depth: n.depth})
}

func (w *usersWalk) rewrite(ctx context.Context, n node, u *openfgav1.Userset) ([]found, bool, error) {
	switch us := u.GetUserset().(type) {
	case *openfgav1.Userset_This:
		return w.direct(ctx, n)
	case *openfgav1.Userset_ComputedUserset:
		return w.dispatch(ctx, n, n.object, us.ComputedUserset.GetRelation())
	case *openfgav1.Userset_TupleToUserset:
		out, err := w.tupleToUserset(ctx, n, us.TupleToUserset)
		return out, false, err
	case *openfgav1.Userset_Union:
		out, err := w.union(ctx, n, us.Union.GetChild())
		return out, false, err
	case *openfgav1.Userset_Intersection:
		out, err := w.intersection(ctx, n, us.Intersection.GetChild())
		return out, false, err
	case *openfgav1.Userset_Difference:
		out, err := w.exclusion(ctx, n, us.Difference)
		return out, false, err
	}
	return nil, false, nil
}

// tuples returns the tuples of n's object and relation whose conditions hold; the
// error joins those of every condition that failed to evaluate.
func (w *usersWalk) tuples(ctx context.Context, n node, relation string) ([]rel.Relationship, error) {
	f := store.Filter{ResourceType: n.object.Type, ResourceIDs: []string{n.object.ID}, Relation: StoredRelation(relation)}
	var out []rel.Relationship
	var errs error
	for item, err := range w.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		ok, err := conditionHolds(w.m, w.reqCtx, item.Relationship.Caveat)
		errs = errors.Join(errs, err)
		if ok {
			out = append(out, item.Relationship)
		}
	}
	return out, errs
}

// conditionHolds evaluates a tuple's condition under m as OpenFGA does: with the
// request context reqCtx under the tuple's own, failing unless every parameter is
// given.
func conditionHolds(m *Model, reqCtx map[string]any, c *rel.Caveat) (bool, error) {
	if c == nil {
		return true, nil
	}
	def := m.Schema.Caveat(c.Name)
	if def == nil {
		return false, &engine.CaveatEvalError{Caveat: c.Name, Err: errors.New("condition was not found")}
	}
	merged := make(map[string]any, len(reqCtx)+len(c.Context))
	maps.Copy(merged, reqCtx)
	maps.Copy(merged, c.Context)
	converted, err := def.Compiled.ConvertContext(merged)
	if err != nil {
		return false, &engine.CaveatEvalError{Caveat: c.Name, Err: err}
	}
	var absent []string
	for _, p := range def.Params {
		if _, ok := converted[p.Name]; !ok {
			absent = append(absent, p.Name)
		}
	}
	if len(absent) > 0 {
		return false, &engine.MissingParamsError{Missing: absent}
	}
	res, err := def.Compiled.Eval(converted)
	if err != nil {
		return false, &engine.CaveatEvalError{Caveat: c.Name, Err: err}
	}
	return res.Satisfied, nil
}

// direct reports the users of n's own tuples: each user object of the filter's type
// (whatever the filter's relation), and the users of each subject set, expanded.
func (w *usersWalk) direct(ctx context.Context, n node) ([]found, bool, error) {
	tuples, errs := w.tuples(ctx, n, n.relation)
	var out []found
	var cycle bool
	for _, t := range tuples {
		s := t.Subject
		if s.Relation == "" {
			if s.Object.Type == w.filter.GetType() {
				out = append(out, found{key: s.Object.Type + ":" + s.Object.ID, has: true})
			}
			continue
		}
		more, c, err := w.dispatch(ctx, n, s.Object, s.Relation)
		out, cycle, errs = append(out, more...), cycle || c, errors.Join(errs, err)
	}
	return out, cycle, errs
}

// tupleToUserset reports the users of `x from y`: those with x on each object y names.
func (w *usersWalk) tupleToUserset(ctx context.Context, n node, t *openfgav1.TupleToUserset) ([]found, error) {
	tuples, errs := w.tuples(ctx, n, t.GetTupleset().GetRelation())
	var out []found
	for _, tk := range tuples {
		more, _, err := w.dispatch(ctx, n, tk.Subject.Object, t.GetComputedUserset().GetRelation())
		out, errs = append(out, more...), errors.Join(errs, err)
	}
	return out, errs
}

// operands expands each operand of an operator on n.
func (w *usersWalk) operands(ctx context.Context, n node, children []*openfgav1.Userset) ([][]found, error) {
	out := make([][]found, len(children))
	var errs error
	for i, c := range children {
		var err error
		out[i], _, err = w.rewrite(ctx, n, c)
		errs = errors.Join(errs, err)
	}
	return out, errs
}

// union reports every user an operand has, with the users every operand excluded
// (counted once per report, as OpenFGA counts them).
func (w *usersWalk) union(ctx context.Context, n node, children []*openfgav1.Userset) ([]found, error) {
	ops, err := w.operands(ctx, n, children)
	has := map[string]bool{}
	excludedCount := map[string]int{}
	for _, op := range ops {
		for _, u := range op {
			for _, x := range u.excluded {
				excludedCount[x]++
			}
			if u.has {
				has[u.key] = true
			}
		}
	}
	var excluded []string
	for _, x := range slices.Sorted(maps.Keys(excludedCount)) {
		if excludedCount[x] == len(children) {
			excluded = append(excluded, x)
		}
	}
	out := make([]found, 0, len(has))
	for _, k := range slices.Sorted(maps.Keys(has)) {
		out = append(out, found{key: k, has: true, excluded: excluded})
	}
	return out, err
}

// intersection reports the users every operand has, an operand with the filter's
// wildcard having them all, less any user an operand excluded.
func (w *usersWalk) intersection(ctx context.Context, n node, children []*openfgav1.Userset) ([]found, error) {
	ops, err := w.operands(ctx, n, children)
	wildcard := w.filter.GetType() + ":" + rel.Wildcard
	count := map[string]int{}
	excluded := map[string]bool{}
	wildcards := 0
	for _, op := range ops {
		has := map[string]bool{}
		for _, u := range op {
			for _, x := range u.excluded {
				excluded[x] = true
			}
			if u.has {
				has[u.key] = true
			}
		}
		if has[wildcard] {
			wildcards++
		}
		for k := range has {
			if !has[wildcard] {
				count[k]++
			} else if _, ok := count[k]; !ok {
				count[k] = 0
			}
		}
	}
	excludedList := slices.Sorted(maps.Keys(excluded))
	var out []found
	for _, k := range slices.Sorted(maps.Keys(count)) {
		if !excluded[k] && count[k]+wildcards == len(children) {
			out = append(out, found{key: k, has: true, excluded: excludedList})
		}
	}
	return out, err
}

// exclusion reports the users of base less those of subtract, by OpenFGA's rules: a
// cycle through subtract leaves nothing (and no error); with the filter's wildcard in
// base, each user subtract has is reported without the relation and excluded.
func (w *usersWalk) exclusion(ctx context.Context, n node, d *openfgav1.Difference) ([]found, error) {
	baseOut, _, baseErr := w.rewrite(ctx, n, d.GetBase())
	subOut, subCycle, subErr := w.rewrite(ctx, n, d.GetSubtract())
	if subCycle {
		return nil, nil
	}
	base, sub := lastByKey(baseOut), lastByKey(subOut)
	wildcard := w.filter.GetType() + ":" + rel.Wildcard
	_, baseWildcard := base[wildcard]
	_, subWildcard := sub[wildcard]
	var out []found
	for _, k := range slices.Sorted(maps.Keys(base)) {
		u := base[k]
		s, subtracted := sub[k]
		switch {
		case baseWildcard:
			if !subtracted && !subWildcard {
				out = append(out, found{key: k, has: u.has, excluded: u.excluded})
			}
			for _, sk := range slices.Sorted(maps.Keys(sub)) {
				switch {
				case sk == wildcard:
					if !subtracted {
						out = append(out, found{key: k})
					}
				case !sub[sk].has:
					out = append(out, found{key: sk, has: true})
				default:
					out = append(out, found{key: sk, excluded: []string{sk}})
				}
			}
		case subWildcard, subtracted:
			// Under the subtracted wildcard alone, OpenFGA reads the user's
			// subtracted report as a zero one, which says the user has the relation.
			out = append(out, found{key: k, has: subtracted && !s.has})
		default:
			out = append(out, found{key: k, has: u.has})
		}
	}
	return out, errors.Join(baseErr, subErr)
}

// lastByKey indexes reports by user, a later report of a user replacing an earlier.
func lastByKey(fs []found) map[string]found {
	out := make(map[string]found, len(fs))
	for _, u := range fs {
		out[u.key] = u
	}
	return out
}

// walkError is the walk's error as OpenFGA reports it: the depth limit before a
// condition's failure; the parameters missing from every condition, together.
func (w *usersWalk) walkError(err error) error {
	if errors.Is(err, engine.ErrMaxDepth) {
		return engine.ErrMaxDepth
	}
	var missing []string
	var failed *engine.CaveatEvalError
	for _, e := range flatten(err) {
		var m *engine.MissingParamsError
		switch {
		case errors.As(e, &m):
			missing = append(missing, m.Missing...)
		case failed == nil && errors.As(e, &failed):
		}
	}
	if len(missing) > 0 {
		return missingError(missing)
	}
	if failed != nil {
		return failed
	}
	return err
}

// flatten lists the errors errors.Join put together.
func flatten(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// userOfKey is the ListUsers answer a walk's user key names.
func userOfKey(key string) *openfgav1.User {
	obj, relation, _ := strings.Cut(key, "#")
	typ, id, _ := strings.Cut(obj, ":")
	switch {
	case id == rel.Wildcard:
		return &openfgav1.User{User: &openfgav1.User_Wildcard{Wildcard: &openfgav1.TypedWildcard{Type: typ}}}
	case relation != "":
		return &openfgav1.User{User: &openfgav1.User_Userset{Userset: &openfgav1.UsersetUser{Type: typ, Id: id, Relation: relation}}}
	}
	return &openfgav1.User{User: &openfgav1.User_Object{Object: &openfgav1.Object{Type: typ, Id: id}}}
}
