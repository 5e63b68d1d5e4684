package engine

import (
	"context"
	"encoding/json"
	"errors"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// ErrWildcardSubject is returned when a check names a wildcard as its subject.
var ErrWildcardSubject = errors.New("cannot perform check on wildcard subject")

// errWildcardLookup is ErrWildcardSubject for LookupResources, worded as SpiceDB's.
var errWildcardLookup error = wildcardLookupError{}

type wildcardLookupError struct{}

func (wildcardLookupError) Error() string        { return "cannot perform lookup resources on wildcard" }
func (wildcardLookupError) Is(target error) bool { return target == ErrWildcardSubject }

// Semantics names whose evaluation rules an engine follows. Each API's engine is
// built with its own: the rules differ where the systems do.
type Semantics int

const (
	// SpiceDB's rules, which Permify's API shares: a wildcard subject is refused and
	// recursion that does not end fails at the depth limit.
	SpiceDB Semantics = iota
	// OpenFGA's rules: a subproblem met again on its own evaluation path answers no
	// for that branch (the other branches decide); the depth limit counts what OpenFGA
	// counts (computed usersets, the objects of `x from y`, subject sets), not the
	// step from a relation to its own stored tuples (a relation, not a permission);
	// and `type:*` may be the subject of a check or lookup of resources, which it
	// passes through tuples naming that wildcard only.
	OpenFGA
)

// OpenFGAMaxDepth is OpenFGA's default resolution depth limit.
const OpenFGAMaxDepth = 25

// Config tunes an Engine.
type Config struct {
	// Semantics selects the evaluation rules (the zero value: SpiceDB's).
	Semantics Semantics
	// MaxDepth bounds how many relations and arrows one check may traverse in a chain;
	// 0 means DefaultMaxDepth.
	MaxDepth int
	// Cache, if not nil, remembers definite subproblem answers (does this subject have
	// this relation or permission on this object?) across requests, keyed by revision.
	// An Engine with a cache must only be given readers of one datastore (and one
	// schema language): revisions of different stores are not told apart. Use Sibling
	// for another.
	Cache *cache.Cache
	// Dispatcher, if not nil, makes this engine one node of a cluster: subproblems other
	// nodes own are sent to them (Dispatcher), and answered by their caches. Like the
	// cache, it belongs to one datastore, which every node shares.
	Dispatcher Dispatcher
	// Index, if not nil, answers membership in the nested sets it holds. Like the
	// cache, it belongs to one datastore, and only readers of its revisions may be
	// given to the engine.
	Index SetIndex
}

// Engine evaluates permissions. It holds no per-request state and is safe for
// concurrent use. One request is evaluated on its caller's goroutine, a set of ids at
// a time with batched store queries rather than a goroutine per branch, so fan-out in a
// request is bounded at one by construction and needs no concurrency limit; the
// server bounds how many requests run at once (admission control).
type Engine struct {
	sem      Semantics
	maxDepth int
	cache    *cache.Cache
	disp     Dispatcher
	index    SetIndex
	seeds    [2]maphash.Seed
	// flight shares one evaluation among identical checks arriving together.
	flight singleflight.Group
}

// New returns an Engine.
func New(cfg Config) *Engine {
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	return &Engine{sem: cfg.Semantics, maxDepth: cfg.MaxDepth, cache: cfg.Cache, disp: cfg.Dispatcher, index: cfg.Index, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// Sibling returns an engine with e's configuration and cache whose answers are keyed
// apart from e's (and from every other sibling's), for another datastore, with that
// datastore's index (nil: none). It dispatches nothing: the cluster's nodes are of e's
// datastore, not the sibling's.
func (e *Engine) Sibling(index SetIndex) *Engine {
	return New(Config{Semantics: e.sem, MaxDepth: e.maxDepth, Cache: e.cache, Index: index})
}

// OpenFGASibling is Sibling with OpenFGA's semantics and depth limit. Its answers
// depend on the model as well as the revision: use one per store and model.
func (e *Engine) OpenFGASibling() *Engine {
	return New(Config{Semantics: OpenFGA, MaxDepth: OpenFGAMaxDepth, Cache: e.cache})
}

// Uncached returns an engine with e's configuration but no cache and no index, for
// readers whose answers are not those of their revision (store.WithUpdates).
func (e *Engine) Uncached() *Engine {
	return New(Config{Semantics: e.sem, MaxDepth: e.maxDepth})
}

// BulkResult is one item's answer in CheckBulk: a Result or an error for that item alone.
type BulkResult struct {
	Result Result
	Err    error
	// Trace is how the item was answered, set by CheckBulkTraced when Err is nil.
	Trace *TraceNode
}

// Check answers one check at the reader's revision under schema s. With a cache, a
// check answered before at the revision costs a lookup, and identical checks arriving
// together share one evaluation.
func (e *Engine) Check(ctx context.Context, s *ir.Schema, r store.Reader, req CheckRequest) (Result, error) {
	if e.cache != nil || e.disp != nil {
		if err := validateCheck(s, req, e.sem); err != nil {
			return Result{}, err
		}
		ctxJSON, err := contextJSON(req.Context)
		switch {
		case err != nil:
			// A context that cannot be written down is neither shared nor sent anywhere.
		case e.disp != nil:
			// In a cluster the check's owner answers it, from its cache, sharing it
			// among identical dispatches: asking this node's cache first would miss
			// for every check another node owns.
			ev := e.evaluatorWith(s, r, req.Subject, req.Context, ctxJSON)
			defer ev.release()
			relation := s.Definition(req.Resource.Type).Relation(req.Permission)
			res, err := ev.relation(ctx, relation, []string{req.Resource.ID}, e.maxDepth)
			if err != nil {
				return Result{}, err
			}
			return toResult(res.get(req.Resource.ID))
		default:
			if sh := e.sharedFor(s, r.Revision(), req.Subject, ctxJSON); sh.c != nil {
				return e.checkShared(ctx, s, r, req, sh)
			}
		}
	}
	res := e.CheckBulk(ctx, s, r, []CheckRequest{req})
	return res[0].Result, res[0].Err
}

// CheckBulk answers many checks. Items that differ only in their resource id are
// evaluated together, so the store sees one batched query per step for all of them,
// and their subproblems are shared.
func (e *Engine) CheckBulk(ctx context.Context, s *ir.Schema, r store.Reader, reqs []CheckRequest) []BulkResult {
	return e.checkBulk(ctx, s, r, reqs, false)
}

func (e *Engine) checkBulk(ctx context.Context, s *ir.Schema, r store.Reader, reqs []CheckRequest, trace bool) []BulkResult {
	out := make([]BulkResult, len(reqs))
	type group struct {
		first int
		items []int
	}
	groups := map[string]*group{}
	var order []string
	for i, req := range reqs {
		if err := validateCheck(s, req, e.sem); err != nil {
			out[i].Err = err
			continue
		}
		k := groupKey(req)
		g, ok := groups[k]
		if !ok {
			g = &group{first: i}
			groups[k] = g
			order = append(order, k)
		}
		g.items = append(g.items, i)
	}
	for _, k := range order {
		g := groups[k]
		first := reqs[g.first]
		ids := make([]string, 0, len(g.items))
		for _, i := range g.items {
			ids = append(ids, reqs[i].Resource.ID)
		}
		ev := e.evaluatorFor(s, r, first.Subject, first.Context)
		if trace {
			// A trace shows every step where it was taken: all of them here, and
			// evaluated.
			ev.routing, ev.index, ev.tr = nil, nil, newTracer(true)
		}
		start := time.Now()
		relation := s.Definition(first.Resource.Type).Relation(first.Permission)
		res, err := ev.relation(ctx, relation, dedupe(ids), e.maxDepth)
		for _, i := range g.items {
			if err != nil {
				out[i].Err = err
				continue
			}
			o := res.get(reqs[i].Resource.ID)
			if out[i].Result, out[i].Err = toResult(o); out[i].Err == nil && trace {
				out[i].Trace = itemTrace(reqs[i], relation, o, ev.tr.result(), time.Since(start))
			}
		}
		ev.release()
	}
	return out
}

// evaluatorFor returns an evaluator for one subject and caveat context with the
// engine's cache and, in a cluster, its routing.
func (e *Engine) evaluatorFor(s *ir.Schema, r store.Reader, subject rel.SubjectRef, reqCtx map[string]any) *evaluator {
	ctxJSON, err := contextJSON(reqCtx)
	if err != nil {
		// A context that cannot be written down is neither shared nor sent anywhere.
		ev := newEvaluator(s, r, subject, reqCtx, shared{})
		ev.index, ev.fga = e.index, e.sem == OpenFGA
		return ev
	}
	return e.evaluatorWith(s, r, subject, reqCtx, ctxJSON)
}

// evaluatorWith is evaluatorFor for a context already written as ctxJSON.
func (e *Engine) evaluatorWith(s *ir.Schema, r store.Reader, subject rel.SubjectRef, reqCtx map[string]any, ctxJSON []byte) *evaluator {
	ev := newEvaluator(s, r, subject, reqCtx, e.sharedFor(s, r.Revision(), subject, ctxJSON))
	ev.index, ev.fga = e.index, e.sem == OpenFGA
	if e.disp != nil {
		ev.routing = &routing{
			disp: e.disp, base: routeBase(subject, ctxJSON), anyBase: routeBase(anySubject(subject), ctxJSON),
			object: subject.Relation == "", floor: e.maxDepth - RoutedLevels,
		}
		ev.ctxJSON = ctxJSON
	}
	return ev
}

// contextJSON is a caveat context's one text: json.Marshal sorts map keys, so equal
// contexts give equal texts. An empty context has none.
func contextJSON(reqCtx map[string]any) ([]byte, error) {
	if len(reqCtx) == 0 {
		return nil, nil
	}
	return json.Marshal(reqCtx)
}

func toResult(o outcome) (Result, error) {
	switch o.st {
	case has:
		return Result{Membership: HasPermission}, nil
	case cond:
		return Result{Membership: Conditional, Missing: o.missing()}, nil
	case depthErr:
		return Result{}, ErrMaxDepth
	case evalErr:
		return Result{}, o.err()
	default:
		return Result{Membership: NoPermission}, nil
	}
}

// groupKey identifies the items that can share one evaluation: all but the resource id.
func groupKey(req CheckRequest) string {
	var b strings.Builder
	b.WriteString(req.Resource.Type)
	b.WriteByte('#')
	b.WriteString(req.Permission)
	b.WriteByte('@')
	b.WriteString(req.Subject.Object.Type)
	b.WriteByte(':')
	b.WriteString(req.Subject.Object.ID)
	b.WriteByte('#')
	b.WriteString(req.Subject.Relation)
	if len(req.Context) > 0 {
		ctxJSON, err := contextJSON(req.Context)
		if err != nil {
			ctxJSON = []byte(req.Resource.ID) // unmarshalable context: never share
		}
		b.WriteByte(' ')
		b.Write(ctxJSON)
	}
	return b.String()
}

// dedupe returns ids without repeats, in first-seen order (ids itself when it has none).
func dedupe(ids []string) []string {
	// A check's usual case, a few ids and no repeat, is told by comparing each pair,
	// which costs less than a map.
	few := len(ids) <= 8
	for i := 0; few && i < len(ids); i++ {
		few = !slices.Contains(ids[:i], ids[i])
	}
	if few {
		return ids
	}
	seen := make(map[string]struct{}, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}
