package engine

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// memoKey names one subproblem of a request: does the subject have rel on object id?
type memoKey struct {
	rel *ir.Relation
	id  string
}

// evaluator answers one group of checks (same subject, same context) for sets of
// resources at a time. Its memo makes each subproblem cost at most one evaluation per
// request, which keeps recursive schemas over cyclic data linear in the depth limit
// instead of exponential.
type evaluator struct {
	s       *ir.Schema
	r       store.Reader
	subject rel.SubjectRef
	reqCtx  map[string]any
	shared  shared
	tr      *tracer // nil unless the request asked for a trace
	// stats counts the request's work (nil: not asked); looked up in the context once,
	// at the first step, rather than at every step.
	stats      *Stats
	statsKnown bool
	// routing, when not nil, sends subproblems owned by other nodes to them; ctxJSON is
	// the caveat context as they receive it.
	routing *routing
	ctxJSON []byte
	// index, when not nil, answers what it holds of the subject's sets; view is its
	// answer for this request's subject and revision, asked for once (viewKnown).
	index     SetIndex
	view      SetView
	viewKnown bool

	// scratch is storage for one store query at a time (the subject filters of
	// directMatches and of direct's subject-set reads), so that the hottest reads of a
	// check do not allocate it.
	scratch struct {
		subjIDs [2]string
		subject store.SubjectFilter
	}

	// visit receives the results of the read in progress (store.Each).
	visit readVisitor

	memo map[memoKey]outcome
	// fga: OpenFGA's semantics (Semantics). path holds the subproblems being
	// evaluated, the request's evaluation path, to tell a cycle.
	fga  bool
	path map[memoKey]bool
	// unmet collects the parameters conditions lacked (OpenFGA's semantics).
	unmet []string
	// evaluated counts the subproblems evaluated under OpenFGA's semantics, which
	// re-evaluates those answered on a cycle, against openFGAMaxSubproblems.
	evaluated int
	// monotone: the evaluation in progress is of unions alone (openfga.go), whose
	// answers on a cycle are remembered until it ends, listed in tainted.
	monotone bool
	tainted  []memoKey
	// left remembers the reads from the subject's side (weight2.go).
	left map[*ir.Relation]*subjectSide
	// tuplesets holds the relationships arrows read, by resource (hops).
	tuplesets map[tuplesetKey][]edge
	// errDepth records, for a subproblem that hit the depth limit, the largest remaining
	// depth at which it did; it fails again at that depth or less.
	errDepth map[memoKey]int
}

// newEvaluator returns an evaluator for one subject and caveat context, from the pool
// of released ones when it has one.
func newEvaluator(s *ir.Schema, r store.Reader, subject rel.SubjectRef, reqCtx map[string]any, sh shared) *evaluator {
	ev := evaluators.Get().(*evaluator)
	ev.s, ev.r, ev.subject, ev.reqCtx, ev.shared = s, r, subject, reqCtx, sh
	return ev
}

// evaluators holds released evaluators with their (emptied) maps: a check that misses
// the cache would otherwise allocate an evaluator and its memo each time.
var evaluators = sync.Pool{New: func() any {
	return &evaluator{memo: map[memoKey]outcome{}, errDepth: map[memoKey]int{}}
}}

// keptMemo bounds the subproblems an evaluator may have remembered and still go back
// to the pool: a map keeps its size when cleared.
const keptMemo = 256

// release returns ev to the pool. The caller must be done with it, and so must every
// goroutine it started (resolve waits for its dispatches).
func (ev *evaluator) release() {
	if len(ev.memo) > keptMemo || len(ev.tuplesets) > keptMemo || len(ev.errDepth) > keptMemo {
		return
	}
	ev.forget()
	*ev = evaluator{memo: ev.memo, errDepth: ev.errDepth, tuplesets: ev.tuplesets, path: ev.path}
	evaluators.Put(ev)
}

// routing is a request's view of the cluster: the dispatcher, the routing hashes of
// the request's subject and context (anyBase: of its type's wildcard, for relations
// of wildcards only, as the cache keys them), and the remaining depth at or below
// which steps are no longer routed (RoutedLevels).
type routing struct {
	disp          Dispatcher
	base, anyBase uint64
	object        bool // the subject is an object: anyBase applies
	floor         int
}

// owner returns the node that owns subproblem r on id (nil: this one).
func (rt *routing) owner(r *ir.Relation, id string) Node {
	base := rt.base
	if rt.object && r.WildcardsOnly() {
		base = rt.anyBase
	}
	return rt.disp.Owner(routeHash(base, r, id))
}

// relation answers relation or permission r of r.Def for every id in ids, with depth
// hops remaining, sending the ids other nodes own to them. Traced, it is one step for
// the ids it evaluates and one for those whose answers were already known.
func (ev *evaluator) relation(ctx context.Context, r *ir.Relation, ids []string, depth int) (results, error) {
	return ev.resolve(ctx, r, ids, depth, true)
}

// resolve is relation; route says whether ids may be sent to the nodes owning them.
func (ev *evaluator) resolve(ctx context.Context, r *ir.Relation, ids []string, depth int, route bool) (results, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	route = route && ev.routing != nil && depth > ev.routing.floor && routed(r, ids)
	// out holds the answers known without evaluating here, made at the first; todo is
	// a prefix of ids until some id is answered otherwise (the usual case: all of them).
	var out results
	todo, prefix := ids[:0], true
	skip := func() {
		if prefix {
			todo, prefix = slices.Clone(todo), false
		}
	}
	answer := func(id string, o outcome) {
		if out == nil {
			out = make(results, len(ids))
		}
		out.put(id, o)
	}
	var remote map[Node][]string
	var keyBuf [1]cache.Key
	keys := keyBuf[:0]         // of todo, when caching
	var known, step *TraceNode // traced steps: answers known before, answers found here
	cached := 0
	// fromIndex: the index answered some ids, which counts as the step's dispatch (the
	// evaluation it stands for), so a request's counts do not depend on the index.
	fromIndex := false
	for i, id := range ids {
		k := memoKey{r, id}
		if ev.fga && ev.path[k] {
			skip()
			answer(id, outCyc)
			step = ev.tr.answered(step, r, id, outCyc, false)
			continue
		}
		if o, ok := ev.memo[k]; ok {
			skip()
			answer(id, o)
			known = ev.tr.answered(known, r, id, o, true)
			continue
		}
		if d, ok := ev.errDepth[k]; (ok && depth <= d) || depth <= 0 {
			skip()
			answer(id, outErr)
			step = ev.tr.answered(step, r, id, outErr, false)
			continue
		}
		if ev.isSubject(r, id) {
			skip()
			answer(id, outHas)
			step = ev.tr.answered(step, r, id, outHas, false)
			continue
		}
		if ev.index != nil && !r.IsPermission() {
			if o, ok := ev.indexed(ctx, r, id, depth); ok {
				skip()
				ev.memo[k] = o
				answer(id, o)
				known = ev.tr.answered(known, r, id, o, true)
				fromIndex = true
				continue
			}
		}
		if route {
			if n := ev.routing.owner(r, id); n != nil {
				skip()
				if remote == nil {
					remote = map[Node][]string{}
				}
				remote[n] = append(remote[n], id)
				continue
			}
		}
		if ev.shared.c != nil {
			ck := ev.shared.key(r, id)
			if o, ok := ev.shared.get(ck); ok {
				skip()
				ev.memo[k] = o
				answer(id, o)
				known = ev.tr.answered(known, r, id, o, true)
				cached++
				continue
			}
			keys = append(keys, ck)
		}
		if prefix {
			todo = ids[: i+1 : i+1]
		} else {
			todo = append(todo, id)
		}
	}
	ev.statsFor(ctx).count(len(todo) > 0 || fromIndex, cached)
	var far <-chan remoteResult
	stopRemote := func() {}
	if len(remote) > 0 {
		var rctx context.Context
		rctx, stopRemote = context.WithCancel(ctx)
		defer stopRemote()
		far = ev.sendRemote(rctx, r, remote, depth, len(todo) == 0)
	}
	if len(todo) > 0 {
		ev.tr.begin(step, r)
		res, err := ev.evaluate(ctx, r, todo, depth)
		if err != nil {
			// A local failure stops the dispatches still in flight, and waits for them:
			// none may outlive the request whose reader it uses.
			stopRemote()
			drain(far, len(remote))
			return nil, err
		}
		ev.tr.end(todo, res)
		// With nothing answered otherwise, res (the answers of todo alone) is out.
		own := out == nil
		if own {
			out = res
		}
		for i, id := range todo {
			o := res.get(id)
			ev.remember(r, id, o, depth)
			if ev.shared.c != nil {
				ev.shared.put(keys[i], o)
			}
			if !own {
				out.put(id, o)
			}
		}
	}
	var firstErr error
	for range len(remote) {
		rr := <-far
		if rr.err != nil {
			firstErr = cmp.Or(firstErr, rr.err)
			continue
		}
		for _, id := range rr.ids {
			o := rr.res.get(id)
			ev.remember(r, id, o, depth)
			answer(id, o)
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// evaluate answers r over ids, which the evaluator has no answer for.
func (ev *evaluator) evaluate(ctx context.Context, r *ir.Relation, ids []string, depth int) (results, error) {
	if ev.fga {
		return ev.evaluateOpenFGA(ctx, r, ids, depth)
	}
	if !r.IsPermission() {
		return ev.direct(ctx, r, ids, depth)
	}
	out, rest, err := ev.chained(ctx, r, ids, depth)
	if err != nil || len(rest) == 0 {
		return out, err
	}
	res, err := ev.expr(ctx, r.Def, r.Rewrite, rest, depth)
	if err != nil || out == nil {
		return res, err
	}
	for id, o := range res {
		out.put(id, o)
	}
	return out, nil
}

// forget drops what the evaluator remembers of the subproblems it answered and the
// relationships its arrows read.
func (ev *evaluator) forget() {
	clear(ev.memo)
	clear(ev.errDepth)
	clear(ev.tuplesets)
	clear(ev.path)
}

// remember records id's answer for the rest of the request: in the memo, or, cut off
// by the depth limit, as failing again at this depth or less.
func (ev *evaluator) remember(r *ir.Relation, id string, o outcome, depth int) {
	k := memoKey{r, id}
	switch o.st {
	case depthErr:
		ev.errDepth[k] = max(ev.errDepth[k], depth)
	case cyc:
		ev.rememberCycle(k, o)
	default:
		ev.memo[k] = o
	}
}

// statsFor returns the Stats the request counts in (nil: none), looked up in the
// context once rather than at every step.
func (ev *evaluator) statsFor(ctx context.Context) *Stats {
	if !ev.statsKnown {
		ev.stats, ev.statsKnown = statsFrom(ctx), true
	}
	return ev.stats
}

// remoteResult is the answer of one node to the ids sent to it.
type remoteResult struct {
	ids []string
	res results
	err error
}

// sendRemote dispatches each node's ids, concurrently with the caller's own work, and
// returns where their answers arrive, one per node. Alone (nothing to do here and one
// node to ask), the dispatch runs on the caller's goroutine.
func (ev *evaluator) sendRemote(ctx context.Context, r *ir.Relation, remote map[Node][]string, depth int, alone bool) <-chan remoteResult {
	out := make(chan remoteResult, len(remote))
	for n, ids := range remote {
		send := func() {
			res, err := ev.dispatchRemote(ctx, n, r, ids, depth)
			out <- remoteResult{ids: ids, res: res, err: err}
		}
		if alone && len(remote) == 1 {
			send()
		} else {
			go send()
		}
	}
	return out
}

// drain waits for n answers on c.
func drain(c <-chan remoteResult, n int) {
	for range n {
		<-c
	}
}

// isSubject: a subject set is a member of itself (group:eng#member has group:eng#member).
func (ev *evaluator) isSubject(r *ir.Relation, id string) bool {
	s := ev.subject
	return s.Relation == r.Name && s.Object.Type == r.Def.Name && s.Object.ID == id
}

// expr evaluates a rewrite over ids. Each branch sees only the ids whose answer it can
// still change: a union skips ids already granted, an intersection and an exclusion
// only look at ids their left side did not rule out.
func (ev *evaluator) expr(ctx context.Context, def *ir.Definition, x *ir.Expr, ids []string, depth int) (results, error) {
	switch x.Kind {
	case ir.Nil:
		return results{}, nil
	case ir.Ref:
		if ev.fga && !x.Rel.IsPermission() {
			// OpenFGA counts no step from a relation to its own tuples.
			return ev.relation(ctx, x.Rel, ids, depth)
		}
		return ev.relation(ctx, x.Rel, ids, depth-1)
	case ir.Arrow:
		return ev.arrow(ctx, def, x, ids, depth)
	case ir.Union:
		acc := results{}
		pending := ids
		for _, c := range x.Children {
			res, err := ev.expr(ctx, def, c, pending, depth)
			if err != nil {
				return nil, err
			}
			granted := 0
			for _, id := range pending {
				o := or(acc.get(id), res.get(id))
				acc.put(id, o)
				if o.st == has {
					granted++
				}
			}
			if granted == len(pending) {
				break
			}
			if granted > 0 {
				// pending may be the caller's ids: the next child sees a copy.
				pending = slices.DeleteFunc(slices.Clone(pending), func(id string) bool { return acc.get(id).st == has })
			}
		}
		return acc, nil
	case ir.Intersection:
		acc, err := ev.expr(ctx, def, x.Children[0], ids, depth)
		if err != nil {
			return nil, err
		}
		for _, c := range x.Children[1:] {
			if acc, err = ev.narrow(ctx, def, c, acc, depth, and, func(o outcome) outcome { return o }); err != nil {
				return nil, err
			}
		}
		return acc, nil
	case ir.Exclusion:
		base, err := ev.expr(ctx, def, x.Children[0], ids, depth)
		if err != nil {
			return nil, err
		}
		return ev.narrow(ctx, def, x.Children[1], base, depth, and, not)
	}
	return results{}, nil
}

// narrow evaluates c on the ids acc still holds and combines: acc[id] op f(c[id]).
func (ev *evaluator) narrow(ctx context.Context, def *ir.Definition, c *ir.Expr, acc results, depth int,
	op func(a, b outcome) outcome, f func(outcome) outcome,
) (results, error) {
	if len(acc) == 0 {
		return acc, nil
	}
	cand := make([]string, 0, len(acc))
	for id := range acc {
		cand = append(cand, id)
	}
	res, err := ev.expr(ctx, def, c, cand, depth)
	if err != nil {
		return nil, err
	}
	out := make(results, len(acc))
	for _, id := range cand {
		out.put(id, op(acc.get(id), f(res.get(id))))
	}
	return out, nil
}
