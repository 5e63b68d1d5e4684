package engine

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// TraceNode is one step of a traced check: relation or permission Relation of
// definition Type, answered for the resources IDs together (evaluation batches
// resources, so one step may answer several). Its children are the steps it asked:
// the relations and permissions of the same resources a permission refers to, the
// targets of arrows and the subject sets of relations, on the objects they lead to.
// Sub-expressions of a permission (unions, intersections, exclusions) are not steps
// of their own; the relations they name are children of the permission.
type TraceNode struct {
	Type       string
	Relation   string
	Permission bool // Relation is a permission rather than a relation
	IDs        []string
	Results    []TraceResult // Results[i] answers IDs[i]
	// Caveats lists the caveats this step evaluated itself, on the relationships it read;
	// those of its children are in the children.
	Caveats  []CaveatTrace
	Children []*TraceNode
	Duration time.Duration
	// Cached: the answers were already known, from earlier in the request or from the
	// engine's cache, so the step was not evaluated and has no children.
	Cached bool
	// ExpiresAt is the earliest expiration of a relationship read by this step or its
	// children, nil if none of them expires.
	ExpiresAt *time.Time
}

// TraceResult is one resource's answer at one step.
type TraceResult struct {
	Result
	// DepthExceeded: the answer was cut off by the depth limit, Result means nothing.
	DepthExceeded bool
	// CaveatErr, when set: the answer depended on a caveat that failed to evaluate,
	// Result means nothing.
	CaveatErr error
}

// Summary is the step's answer taken over all its resources, as SpiceDB reports a
// batched step: has if any resource has it, else conditional if any is, else no.
// ok is false when every answer was cut off by the depth limit or a failed caveat.
func (n *TraceNode) Summary() (m Membership, ok bool) {
	for _, r := range n.Results {
		switch {
		case r.DepthExceeded || r.CaveatErr != nil:
			continue
		case r.Membership == HasPermission:
			return HasPermission, true
		case r.Membership == Conditional:
			m = Conditional
		}
		ok = true
	}
	return m, ok
}

// CaveatResult is how a caveat evaluated.
type CaveatResult int

const (
	CaveatFalse CaveatResult = iota
	CaveatTrue
	// CaveatMissingContext: the answer depends on parameters no context supplied.
	CaveatMissingContext
	// CaveatFailed: the caveat could not be evaluated (a context value of the wrong
	// type, a runtime error, the cost limit).
	CaveatFailed
)

// CaveatTrace is one caveat evaluation: the caveat of a relationship of ResourceID.
type CaveatTrace struct {
	ResourceID string
	Caveat     string
	Expression string
	// Context holds the values the expression was given: the caveat's parameters
	// from the request's context overlaid with the relationship's own.
	Context map[string]any
	Missing []string // the parameters the answer waits for, when CaveatMissingContext
	Result  CaveatResult
}

// CheckTraced answers one check as Check does and returns how: the trace of the step
// that answered it. Tracing costs time and memory, so only requests that ask for it
// take this path; it uses and fills the engine's cache like Check, but evaluates on
// its own instead of sharing an identical check in flight, so that the trace is its own.
func (e *Engine) CheckTraced(ctx context.Context, s *ir.Schema, r store.Reader, req CheckRequest) (Result, *TraceNode, error) {
	res := e.checkBulk(ctx, s, r, []CheckRequest{req}, true)
	if res[0].Err != nil {
		return res[0].Result, nil, res[0].Err
	}
	// One resource is answered by one step, evaluated or known; the item's own step
	// around it would only repeat it.
	if tr := res[0].Trace; len(tr.Children) == 1 {
		return res[0].Result, tr.Children[0], nil
	}
	return res[0].Result, res[0].Trace, nil
}

// CheckBulkTraced answers checks as CheckBulk does and sets every answered item's Trace:
// a step for the item itself whose children are the steps of the evaluation it shared
// with the items that differ from it only in the resource id (the same *TraceNode
// values in each of them).
func (e *Engine) CheckBulkTraced(ctx context.Context, s *ir.Schema, r store.Reader, reqs []CheckRequest) []BulkResult {
	return e.checkBulk(ctx, s, r, reqs, true)
}

// itemTrace is the step of one bulk item: its own resource and answer over the steps
// of its group's evaluation.
func itemTrace(req CheckRequest, relation *ir.Relation, o outcome, steps []*TraceNode, took time.Duration) *TraceNode {
	return &TraceNode{
		Type: req.Resource.Type, Relation: req.Permission, Permission: relation.IsPermission(),
		IDs: []string{req.Resource.ID}, Results: []TraceResult{traceResult(o)},
		Children: steps, Duration: took, ExpiresAt: earliestExpiry(steps),
	}
}

func earliestExpiry(steps []*TraceNode) *time.Time {
	var at *time.Time
	for _, n := range steps {
		at = earlier(at, n.ExpiresAt)
	}
	return at
}

func earlier(a, b *time.Time) *time.Time {
	if a == nil || (b != nil && b.Before(*a)) {
		return b
	}
	return a
}

func traceResult(o outcome) TraceResult {
	switch o.st {
	case depthErr:
		return TraceResult{DepthExceeded: true}
	case evalErr:
		return TraceResult{CaveatErr: o.err()}
	}
	res, _ := toResult(o)
	return TraceResult{Result: res}
}

// tracer builds the trace of one evaluation. A nil *tracer traces nothing, and every
// method is then a no-op, so that the evaluator's hooks cost one comparison when
// tracing is off.
type tracer struct {
	open   []openStep   // the steps being evaluated, innermost last
	steps  []*TraceNode // the top-level steps
	sorted bool
}

type openStep struct {
	n     *TraceNode
	start time.Time
}

func newTracer(on bool) *tracer {
	if !on {
		return nil
	}
	return &tracer{}
}

// result returns the top-level steps, each step's resources in id order: evaluation
// visits them in no particular order, and a trace should read the same every time.
func (t *tracer) result() []*TraceNode {
	if !t.sorted {
		sortSteps(t.steps)
		t.sorted = true
	}
	return t.steps
}

func sortSteps(steps []*TraceNode) {
	for _, n := range steps {
		sort.Sort(byID{n})
		sortSteps(n.Children)
	}
}

// byID sorts a step's resources and their answers together.
type byID struct{ n *TraceNode }

func (b byID) Len() int           { return len(b.n.IDs) }
func (b byID) Less(i, j int) bool { return b.n.IDs[i] < b.n.IDs[j] }
func (b byID) Swap(i, j int) {
	b.n.IDs[i], b.n.IDs[j] = b.n.IDs[j], b.n.IDs[i]
	b.n.Results[i], b.n.Results[j] = b.n.Results[j], b.n.Results[i]
}

// attach makes n a step of the innermost open step, or a top-level one.
func (t *tracer) attach(n *TraceNode) {
	if len(t.open) == 0 {
		t.steps = append(t.steps, n)
		return
	}
	p := t.open[len(t.open)-1].n
	p.Children = append(p.Children, n)
}

func newStep(r *ir.Relation, cached bool) *TraceNode {
	return &TraceNode{Type: r.Def.Name, Relation: r.Name, Permission: r.IsPermission(), Cached: cached}
}

// answered records o, found for id without evaluating r, in n: the step of one
// relation call holding such answers, created on first use.
func (t *tracer) answered(n *TraceNode, r *ir.Relation, id string, o outcome, cached bool) *TraceNode {
	if t == nil {
		return nil
	}
	if n == nil {
		n = newStep(r, cached)
		t.attach(n)
	}
	n.IDs = append(n.IDs, id)
	n.Results = append(n.Results, traceResult(o))
	return n
}

// begin opens the step evaluating r (n, or a new step if nil); the steps evaluated
// until end become its children.
func (t *tracer) begin(n *TraceNode, r *ir.Relation) {
	if t == nil {
		return
	}
	if n == nil {
		n = newStep(r, false)
		t.attach(n)
	}
	t.open = append(t.open, openStep{n: n, start: time.Now()})
}

// end closes the innermost step, recording the answers res gave for ids.
func (t *tracer) end(ids []string, res results) {
	if t == nil {
		return
	}
	top := t.open[len(t.open)-1]
	t.open = t.open[:len(t.open)-1]
	n := top.n
	n.Duration = time.Since(top.start)
	for _, id := range ids {
		n.IDs = append(n.IDs, id)
		n.Results = append(n.Results, traceResult(res.get(id)))
	}
	if len(t.open) > 0 {
		p := t.open[len(t.open)-1].n
		p.ExpiresAt = earlier(p.ExpiresAt, n.ExpiresAt)
	}
}

// read notes the expiration of a relationship the innermost step read (nil: it does
// not expire).
func (t *tracer) read(expires *time.Time) {
	if t == nil || expires == nil || len(t.open) == 0 {
		return
	}
	n := t.open[len(t.open)-1].n
	n.ExpiresAt = earlier(n.ExpiresAt, expires)
}

// caveat records, in the innermost step, that the caveat c of a relationship of
// resource id evaluated to o under ev's request context.
func (t *tracer) caveat(ev *evaluator, id string, c *rel.Caveat, o outcome) {
	if t == nil || c == nil || len(t.open) == 0 {
		return
	}
	ct := CaveatTrace{ResourceID: id, Caveat: c.Name, Context: map[string]any{}}
	var params []caveat.Param
	if def := ev.s.Caveat(c.Name); def != nil { // nil: a caveat the schema does not define (CaveatFailed)
		ct.Expression, params = strings.TrimSpace(def.Expression), def.Params
	}
	for _, p := range params {
		if v, ok := c.Context[p.Name]; ok {
			ct.Context[p.Name] = v
		} else if v, ok := ev.reqCtx[p.Name]; ok {
			ct.Context[p.Name] = v
		}
	}
	switch o.st {
	case has:
		ct.Result = CaveatTrue
	case cond:
		ct.Result, ct.Missing = CaveatMissingContext, o.missing()
	case evalErr:
		ct.Result = CaveatFailed
	}
	n := t.open[len(t.open)-1].n
	n.Caveats = append(n.Caveats, ct)
}
