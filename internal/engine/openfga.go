package engine

import (
	"context"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// OpenFGA's semantics (Semantics): a subproblem met again on its own evaluation path
// answers cyc, no for that path alone. The evaluator keeps the path, the subproblems
// in progress; an answer that met a cycle is not remembered past its path, nor cached.
//
// Evaluation is batched, so a batch's ids are on the path together, and a cycle met
// through another id of the batch is not on an id's own path: under intersections and
// exclusions such an id is evaluated again alone, which is exact and, on dense cyclic
// data, exponential (bounded by openFGAMaxSubproblems).
//
// When everything the evaluation can reach is unions (no intersection, exclusion or
// condition), the answer is reachability, which a search that never expands a
// subproblem twice decides for the subproblem it starts from: a branch cut at a
// subproblem in progress loses nothing that subproblem's own expansion does not find
// and pass up to the start through unions. Answers met on a cycle are then remembered
// until the evaluation that started the search ends (they may be wrong for any other
// start), and only its starting ids answered cyc are evaluated again alone.

// evaluateOpenFGA is evaluate under OpenFGA's semantics.
func (ev *evaluator) evaluateOpenFGA(ctx context.Context, r *ir.Relation, ids []string, depth int) (results, error) {
	if r.ReachedFrom != nil && !ev.reachedFrom(r.ReachedFrom) {
		// OpenFGA answers no at once for a relation its graph of the model has no path
		// to from the subject (after the depth limit, cycles on the path and a subject
		// set of the object itself, as resolve has): no cycle below it counts.
		out := make(results, len(ids))
		for _, id := range ids {
			out.put(id, outNo)
		}
		return out, nil
	}
	if ev.evaluated += len(ids); ev.evaluated > openFGAMaxSubproblems {
		return nil, ErrTooComplex
	}
	if ev.path == nil {
		ev.path = map[memoKey]bool{}
	}
	start := len(ev.path) == 0
	if start {
		ev.monotone = unionsOnly(r)
	}
	for _, id := range ids {
		ev.path[memoKey{r, id}] = true
	}
	var res results
	var err error
	if r.IsPermission() {
		res, err = ev.expr(ctx, r.Def, r.Rewrite, ids, depth)
	} else {
		res, err = ev.direct(ctx, r, ids, depth)
	}
	for _, id := range ids {
		delete(ev.path, memoKey{r, id})
	}
	if start && ev.monotone {
		for _, k := range ev.tainted {
			delete(ev.memo, k)
		}
		ev.tainted = ev.tainted[:0]
	}
	if err != nil || len(ids) == 1 || ev.monotone && !start {
		return res, err
	}
	for _, id := range ids {
		if res.get(id).st != cyc {
			continue
		}
		alone, err := ev.resolve(ctx, r, []string{id}, depth, false)
		if err != nil {
			return nil, err
		}
		res.put(id, alone.get(id))
	}
	return res, nil
}

// rememberCycle keeps an answer met on a cycle for the rest of a search of unions
// alone (see above); otherwise it holds for its path only and is not kept.
func (ev *evaluator) rememberCycle(k memoKey, o outcome) {
	if ev.monotone && len(ev.path) > 0 {
		ev.memo[k] = o
		ev.tainted = append(ev.tainted, k)
	}
}

// unionsOnly reports whether everything evaluating r can reach is unions: no
// intersection, exclusion or caveated subject type on any relation or permission
// reachable from r through references, arrows and subject sets.
func unionsOnly(r *ir.Relation) bool {
	seen := map[*ir.Relation]bool{}
	stack := []*ir.Relation{r}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x == nil || seen[x] {
			continue
		}
		seen[x] = true
		for _, a := range x.Allowed {
			if a.Caveat != "" {
				return false
			}
			stack = append(stack, a.Rel)
		}
		if x.Rewrite != nil && !unionExpr(x.Rewrite, &stack) {
			return false
		}
	}
	return true
}

// unionExpr reports whether x is unions alone, pushing the relations it reaches.
func unionExpr(x *ir.Expr, stack *[]*ir.Relation) bool {
	switch x.Kind {
	case ir.Intersection, ir.Exclusion:
		return false
	case ir.Ref:
		*stack = append(*stack, x.Rel)
	case ir.Arrow:
		if x.ArrowKind == ir.ArrowAll {
			return false
		}
		*stack = append(*stack, x.TuplesetRel)
		for _, d := range x.TuplesetRel.Allowed {
			*stack = append(*stack, x.TargetOn(d.Def))
		}
	}
	for _, c := range x.Children {
		if !unionExpr(c, stack) {
			return false
		}
	}
	return true
}

// reachedFrom reports whether the subject is among users (ir.Relation.ReachedFrom):
// an object or wildcard subject by its type or its type's wildcard, a subject set by
// its type and relation.
func (ev *evaluator) reachedFrom(users []string) bool {
	s := ev.subject
	for _, u := range users {
		typ, rest, _ := strings.Cut(u, ":")
		if s.Relation == "" {
			if u == s.Object.Type || (rest == rel.Wildcard && typ == s.Object.Type) {
				return true
			}
			continue
		}
		typ, relation, ok := strings.Cut(u, "#")
		if ok && typ == s.Object.Type && relation == s.Relation {
			return true
		}
	}
	return false
}
