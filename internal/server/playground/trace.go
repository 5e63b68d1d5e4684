package playground

import (
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// traceNode is engine.TraceNode as the page renders it: one step of a check, the
// resources it answered, the caveats it evaluated and the steps it asked.
type traceNode struct {
	Type       string `json:"type"`
	Relation   string `json:"relation"`
	Permission bool   `json:"permission"`
	// Expression is a permission's rewrite (`viewer - banned`), so that the tree says
	// how its children's answers combine: which union, intersection or exclusion decided.
	Expression string        `json:"expression,omitempty"`
	Results    []traceResult `json:"results"`
	Caveats    []traceCaveat `json:"caveats,omitempty"`
	Children   []*traceNode  `json:"children,omitempty"`
	// Micros is the step's evaluation time in microseconds.
	Micros    float64    `json:"micros"`
	Cached    bool       `json:"cached,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

type traceResult struct {
	ID      string   `json:"id"`
	Result  string   `json:"result"` // a membership, or DEPTH_EXCEEDED
	Missing []string `json:"missing,omitempty"`
}

type traceCaveat struct {
	ResourceID string         `json:"resourceId"`
	Caveat     string         `json:"caveat"`
	Expression string         `json:"expression"`
	Context    map[string]any `json:"context"`
	Missing    []string       `json:"missing,omitempty"`
	Result     string         `json:"result"` // true, false or missing context
}

func newTraceNode(s *ir.Schema, n *engine.TraceNode) *traceNode {
	if n == nil {
		return nil
	}
	out := &traceNode{
		Type: n.Type, Relation: n.Relation, Permission: n.Permission, Cached: n.Cached,
		Micros: float64(n.Duration.Nanoseconds()) / 1e3, ExpiresAt: n.ExpiresAt,
	}
	if d := s.Definition(n.Type); d != nil {
		if r := d.Relation(n.Relation); r != nil && r.Rewrite != nil {
			out.Expression = schema.FormatExpr(r.Rewrite)
		}
	}
	for i, id := range n.IDs {
		r := n.Results[i]
		tr := traceResult{ID: id, Result: r.Membership.String(), Missing: r.Missing}
		if r.DepthExceeded {
			tr.Result, tr.Missing = "DEPTH_EXCEEDED", nil
		} else if r.CaveatErr != nil {
			tr.Result, tr.Missing = "CAVEAT_ERROR", nil
		}
		out.Results = append(out.Results, tr)
	}
	for _, c := range n.Caveats {
		tc := traceCaveat{ResourceID: c.ResourceID, Caveat: c.Caveat, Expression: c.Expression, Context: c.Context, Missing: c.Missing, Result: "false"}
		switch c.Result {
		case engine.CaveatTrue:
			tc.Result = "true"
		case engine.CaveatMissingContext:
			tc.Result = "missing context"
		case engine.CaveatFailed:
			tc.Result = "error"
		}
		out.Caveats = append(out.Caveats, tc)
	}
	for _, c := range n.Children {
		out.Children = append(out.Children, newTraceNode(s, c))
	}
	return out
}
