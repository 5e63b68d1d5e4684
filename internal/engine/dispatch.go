package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// Dispatcher spreads subproblems over the nodes of a cluster: each subproblem (does
// the subject have this relation on this resource?) has one owner, whose cache is
// the one that remembers its answer. The engine asks the dispatcher who owns a
// subproblem and hands the subproblems of other nodes to them; how they travel is the
// dispatcher's business, not the engine's.
type Dispatcher interface {
	// Owner returns the node that owns the subproblem whose routing hash is h, or nil
	// when this node should answer it (it owns it, or its owner is marked down).
	Owner(h uint64) Node
}

// Node is another node of a cluster.
type Node interface {
	// Dispatch answers sp on the node. local answers it on this node instead; the
	// node calls it when the peer cannot (it is unreachable, busy, or failed) and
	// besides it when the peer is slow (hedging), and the first answer wins. Dispatch
	// fails only when local does.
	Dispatch(ctx context.Context, sp *Subproblem, local func(context.Context) (*Answers, error)) (*Answers, error)
}

// Subproblem is one dispatched step of a check: does Subject have Relation on each of
// ResourceIDs, at Revision, with Depth hops left and the caveat context Context (a
// JSON object, or empty)? Everything an answer depends on travels with it, so the
// node answering it answers exactly what this node would.
type Subproblem struct {
	Revision     store.Revision
	ResourceType string
	Relation     string
	ResourceIDs  []string
	Subject      rel.SubjectRef
	Context      []byte
	Depth        int
}

// RoutedLevels is how many levels of a check's tree of subproblems are routed to their
// owners: the check itself and the steps within RoutedLevels-1 relations or arrows of
// it; deeper steps are answered on the node that reaches them. An evaluator remembers
// every subproblem it answered during the request, which keeps recursion over cyclic
// data linear in the depth limit; each dispatch starts that memory afresh on the node
// receiving it, so routing every level would explore cycles once per path, a cost
// that grows with the depth limit at every hop. The top levels are the subproblems
// checks share most, and the ones worth one owner's cache.
const RoutedLevels = 3

// AnswerState is one resource's answer to a Subproblem.
type AnswerState uint8

const (
	// AnswerNo: the subject does not have the relation.
	AnswerNo AnswerState = iota
	// AnswerHas: the subject has the relation.
	AnswerHas
	// AnswerConditional: the answer depends on the caveat parameters in Missing.
	AnswerConditional
	// AnswerMaxDepth: the answer depended on a branch cut off by the depth limit.
	AnswerMaxDepth
	// AnswerCaveatError: the answer depended on the caveat in Errors, which failed to
	// evaluate. It travels as an answer, not as a failed dispatch: the node that sent
	// the subproblem decides whether it can change its own answer.
	AnswerCaveatError
)

// Answers holds a Subproblem's answers, States[i] (and Missing[i] when conditional,
// Errors[i] when a caveat failed) for ResourceIDs[i], and the work they cost on the
// node that answered, counted as the engine counts its own (Stats).
type Answers struct {
	States     []AnswerState
	Missing    [][]string
	Errors     []*CaveatEvalError // nil when no answer is AnswerCaveatError
	Dispatched int64
	Cached     int64
}

// routed reports whether the subproblems of r on ids go to their owners. Permissions
// and relations that subject sets reach through are routed. So is a plain relation
// (of subjects only) asked of one resource, the shape most checks reach (the `member`
// of a check's group, `owner->follower` of one content): its owner's cache answers it
// for every check that reaches it. Asked of many resources, a plain relation is one
// batched read here, not one read on each node owning some of them.
func routed(r *ir.Relation, ids []string) bool {
	if r.IsPermission() || len(ids) == 1 {
		return true
	}
	for _, a := range r.Allowed {
		if a.Relation != "" && !a.Wildcard {
			return true
		}
	}
	return false
}

// routeBase hashes what every subproblem of a request shares (the subject and the
// caveat context) with FNV-1a, which every node computes alike: routing must agree
// across processes, unlike the cache's per-process seeded keys.
func routeBase(subject rel.SubjectRef, ctxJSON []byte) uint64 {
	h := uint64(fnvOffset)
	for _, s := range [...]string{subject.Object.Type, subject.Object.ID, subject.Relation} {
		h = fnvString(h, s)
	}
	for _, b := range ctxJSON {
		h = (h ^ uint64(b)) * fnvPrime
	}
	return h
}

// routeHash names subproblem r on resource id for routing: the revision is left out,
// so a subproblem keeps its owner from one revision to the next.
func routeHash(base uint64, r *ir.Relation, id string) uint64 {
	return fnvString(fnvString(fnvString(base, r.Def.Name), r.Name), id)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvString hashes s and a terminator into h.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return (h ^ 0xff) * fnvPrime
}

// dispatchRemote sends ids (owned by n) to n and returns their outcomes. The local
// answer a node falls back to is computed by a fresh evaluator, never ev: hedging may
// run it on another goroutine while ev carries on.
func (ev *evaluator) dispatchRemote(ctx context.Context, n Node, r *ir.Relation, ids []string, depth int) (results, error) {
	sp := &Subproblem{
		Revision: ev.r.Revision(), ResourceType: r.Def.Name, Relation: r.Name, ResourceIDs: ids,
		Subject: ev.subject, Context: ev.ctxJSON, Depth: depth,
	}
	// The local answer reads ev's request as it is now: a hedged one may still run
	// after ev's request is over and ev serves another.
	s, rd, subject, reqCtx, sh, routing, ctxJSON, index := ev.s, ev.r, ev.subject, ev.reqCtx, ev.shared, ev.routing, ev.ctxJSON, ev.index
	local := func(ctx context.Context) (*Answers, error) {
		sub := newEvaluator(s, rd, subject, reqCtx, sh)
		defer sub.release()
		sub.routing, sub.ctxJSON, sub.index = routing, ctxJSON, index
		return sub.answer(ctx, r, ids, depth)
	}
	a, err := n.Dispatch(ctx, sp, local)
	if err != nil {
		return nil, err
	}
	if len(a.States) != len(ids) || len(a.Missing) != len(ids) || (a.Errors != nil && len(a.Errors) != len(ids)) {
		return nil, fmt.Errorf("dispatch to another node answered %d of %d resources", len(a.States), len(ids))
	}
	if st := ev.statsFor(ctx); st != nil {
		st.Dispatched.Add(a.Dispatched)
		st.Cached.Add(a.Cached)
	}
	out := make(results, len(ids))
	for i, id := range ids {
		o := outcome{st: state(a.States[i])}
		switch {
		case o.st == evalErr:
			if a.Errors == nil || a.Errors[i] == nil {
				return nil, fmt.Errorf("dispatch to another node answered a failed caveat without its error")
			}
			o.d = &outcomeDetail{err: a.Errors[i]}
		case a.Missing[i] != nil:
			o.d = &outcomeDetail{missing: a.Missing[i]}
		}
		out.put(id, o)
	}
	return out, nil
}

// answer evaluates r on ids here, without routing ids themselves anywhere (their
// steps still go to their owners), and returns the answers in ids' order.
func (ev *evaluator) answer(ctx context.Context, r *ir.Relation, ids []string, depth int) (*Answers, error) {
	res, err := ev.resolve(ctx, r, ids, depth, false)
	if err != nil {
		return nil, err
	}
	a := &Answers{States: make([]AnswerState, len(ids)), Missing: make([][]string, len(ids))}
	for i, id := range ids {
		o := res.get(id)
		a.States[i], a.Missing[i] = AnswerState(o.st), o.missing()
		if o.st == evalErr {
			if a.Errors == nil {
				a.Errors = make([]*CaveatEvalError, len(ids))
			}
			a.Errors[i] = o.err()
		}
	}
	return a, nil
}

// ErrBadSubproblem: a dispatched subproblem no node of this cluster would send (a name
// or id the API would refuse, a depth outside this node's limit, a definition or
// relation its schema lacks); the error wrapping it says which.
var ErrBadSubproblem = errors.New("invalid dispatched subproblem")

// checkSubproblem checks what a peer's API validated before dispatching: names and ids
// as the API takes them, and a depth within this node's limit, so that a subproblem
// cannot recurse past it.
func (e *Engine) checkSubproblem(sp *Subproblem) error {
	if sp.Depth < 0 || sp.Depth > e.maxDepth {
		return fmt.Errorf("depth %d is outside this node's limit of 0 to %d (do the nodes' --dispatch-max-depth differ?)", sp.Depth, e.maxDepth)
	}
	if err := rel.ValidateType(sp.ResourceType); err != nil {
		return fmt.Errorf("resource type: %w", err)
	}
	if err := rel.ValidateRelationName(sp.Relation); err != nil {
		return fmt.Errorf("relation: %w", err)
	}
	if err := rel.ValidateSubject(sp.Subject); err != nil {
		return fmt.Errorf("subject: %w", err)
	}
	for i, id := range sp.ResourceIDs {
		if err := rel.ValidateObjectID(id); err != nil {
			return fmt.Errorf("resource id %d: %w", i, err)
		}
	}
	return nil
}

// AnswerDispatched answers a subproblem another node dispatched here, at the reader's
// revision (which must be sp.Revision) under the schema in force there. Its resources
// are evaluated on this node whoever the ring now says owns them, so a subproblem is
// never passed on again; the steps it takes are routed as usual.
func (e *Engine) AnswerDispatched(ctx context.Context, s *ir.Schema, r store.Reader, sp *Subproblem) (*Answers, error) {
	if r.Revision() != sp.Revision {
		return nil, fmt.Errorf("dispatched subproblem at revision %d read at %d", sp.Revision, r.Revision())
	}
	if err := e.checkSubproblem(sp); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSubproblem, err)
	}
	d := s.Definition(sp.ResourceType)
	if d == nil {
		return nil, fmt.Errorf("%w: it names definition %q, which the schema at revision %d does not define", ErrBadSubproblem, sp.ResourceType, sp.Revision)
	}
	relation := d.Relation(sp.Relation)
	if relation == nil {
		return nil, fmt.Errorf("%w: it names %s#%s, which the schema at revision %d does not define", ErrBadSubproblem, sp.ResourceType, sp.Relation, sp.Revision)
	}
	var reqCtx map[string]any
	if len(sp.Context) > 0 {
		if err := json.Unmarshal(sp.Context, &reqCtx); err != nil {
			return nil, fmt.Errorf("%w: its caveat context: %w", ErrBadSubproblem, err)
		}
	}
	var st Stats
	ctx = WithStats(ctx, &st)
	ev := e.evaluatorFor(s, r, sp.Subject, reqCtx)
	defer ev.release()
	a, err := ev.answer(ctx, relation, sp.ResourceIDs, sp.Depth)
	if err != nil {
		return nil, err
	}
	a.Dispatched, a.Cached = st.Dispatched.Load(), st.Cached.Load()
	return a, nil
}
