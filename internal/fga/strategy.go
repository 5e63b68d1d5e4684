package fga

import (
	"strings"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"github.com/openfga/language/pkg/go/graph"
)

// strategies tells, from OpenFGA's weighted graph of a model (built by its language
// library, as OpenFGA builds it), where OpenFGA resolves a subject set or an arrow
// from the subject's side (its weight-two strategy) rather than by following the
// object's tuples, which decides which conditions a check evaluates (see the engine's
// weight2.go). OpenFGA builds no graph for some models (an intersection whose operands
// reach no common type, an intersection or exclusion on a tuple cycle); it then
// resolves everything by following tuples, and so does a nil wg.
type strategies struct {
	wg    *graph.WeightedAuthorizationModelGraph
	types []string // every type of the model: the subject types to weigh
	// reached holds, by relation ("type#relation"), the users from which OpenFGA's
	// graph of the model has a path to it (ir.Relation.ReachedFrom); nil when
	// the graph could not be built.
	reached map[string][]string
}

func newStrategies(m *openfgav1.AuthorizationModel) strategies {
	wg, err := graph.NewWeightedAuthorizationModelGraphBuilder().Build(m)
	if err != nil {
		wg = nil
	}
	s := strategies{wg: wg, reached: reachedFrom(m)}
	for _, td := range m.GetTypeDefinitions() {
		s.types = append(s.types, td.GetType())
	}
	return s
}

// reachedFrom returns, by relation, the users from which OpenFGA's (unweighted) graph
// of the model has a path to it, as OpenFGA's Check asks of every relation it
// resolves (PathExists): a breadth-first walk from each type, type wildcard and
// subject set, the relation itself included for a subject set. Every relation has a
// list, empty when nothing reaches it; the map is nil when the graph cannot be built.
func reachedFrom(m *openfgav1.AuthorizationModel) map[string][]string {
	g, err := graph.NewAuthorizationModelGraph(m)
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	var sources []*graph.AuthorizationModelNode
	for nodes := g.Nodes(); nodes.Next(); {
		n, ok := nodes.Node().(*graph.AuthorizationModelNode)
		if !ok {
			continue
		}
		switch n.NodeType() {
		case graph.SpecificTypeAndRelation:
			if _, ok := out[n.Label()]; !ok {
				out[n.Label()] = []string{}
			}
			sources = append(sources, n)
		case graph.SpecificType, graph.SpecificTypeWildcard:
			sources = append(sources, n)
		}
	}
	for _, src := range sources {
		seen := map[int64]bool{src.ID(): true}
		queue := []*graph.AuthorizationModelNode{src}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			if n.NodeType() == graph.SpecificTypeAndRelation {
				out[n.Label()] = append(out[n.Label()], src.Label())
			}
			for next := g.From(n.ID()); next.Next(); {
				x, ok := next.Node().(*graph.AuthorizationModelNode)
				if ok && !seen[x.ID()] {
					seen[x.ID()] = true
					queue = append(queue, x)
				}
			}
		}
	}
	return out
}

// userset returns the subject types for which OpenFGA reads subject set ref of
// typ#relation's type restrictions from the subject's side: typ#relation is on no
// tuple cycle and not recursive, and ref reaches the subject type in one step.
func (s strategies) userset(typ, relation string, ref *openfgav1.RelationReference) []string {
	if s.wg == nil || ref.GetRelation() == "" {
		return nil
	}
	node, ok := s.wg.GetNodeByID(typ + "#" + relation)
	if !ok || node.IsPartOfTupleCycle() || node.GetRecursiveRelation() != "" {
		return nil
	}
	set, ok := s.wg.GetNodeByID(ref.GetType() + "#" + ref.GetRelation())
	if !ok {
		return nil
	}
	var out []string
	for _, t := range s.types {
		if w, ok := set.GetWeight(t); ok && w == 1 {
			out = append(out, t)
		}
	}
	return out
}

// arrow returns the subject types for which OpenFGA resolves `computed from
// tupleset` in typ#relation's rewrite from the subject's side: typ#relation reaches
// the type, and the arrow's edges that do reach it do so in at most two steps.
func (s strategies) arrow(typ, relation string, ttu *openfgav1.TupleToUserset) []string {
	if s.wg == nil {
		return nil
	}
	node, ok := s.wg.GetNodeByID(typ + "#" + relation)
	if !ok {
		return nil
	}
	tupleset := typ + "#" + ttu.GetTupleset().GetRelation()
	computed := "#" + ttu.GetComputedUserset().GetRelation()
	var out []string
	for _, t := range s.types {
		if _, ok := node.GetWeight(t); ok && s.arrowWithin2(node, tupleset, computed, t) {
			out = append(out, t)
		}
	}
	return out
}

// arrowWithin2 looks through node's operators for the arrow's edges, as OpenFGA
// does: true when one reaches t and none needs more than two steps for it.
func (s strategies) arrowWithin2(node *graph.WeightedAuthorizationModelNode, tupleset, computed, t string) bool {
	edges, ok := s.wg.GetEdgesFromNode(node)
	if !ok {
		return false
	}
	found := false
	for !found {
		var inner []*graph.WeightedAuthorizationModelEdge
		for _, e := range edges {
			if e.GetEdgeType() == graph.RewriteEdge {
				more, ok := s.wg.GetEdgesFromNode(e.GetTo())
				if !ok {
					return false
				}
				inner = append(inner, more...)
			}
			if e.GetEdgeType() == graph.TTUEdge && e.GetTuplesetRelation() == tupleset && strings.HasSuffix(e.GetTo().GetUniqueLabel(), computed) {
				if w, ok := e.GetWeight(t); ok {
					if w > 2 {
						return false
					}
					found = true
				}
			}
		}
		if len(inner) == 0 {
			break
		}
		edges = inner
	}
	return found
}

// recursive returns the subject types for which OpenFGA resolves typ#relation's
// subject set of itself (`define member: [user, group#member]`) by its recursive
// strategy: the relation is recursive through that subject set alone, on no tuple
// cycle, and everything else in it reaches the type in one step.
func (s strategies) recursive(typ, relation string) []string {
	return s.recursiveThrough(typ, relation, graph.DirectEdge, graph.DirectLogicalEdge)
}

// recursiveArrow is recursive for an arrow of typ#relation to itself (`define viewer:
// [user] or viewer from parent`, parent of typ), OpenFGA's recursive strategy for
// `x from y`.
func (s strategies) recursiveArrow(typ, relation string) []string {
	return s.recursiveThrough(typ, relation, graph.TTUEdge, graph.TTULogicalEdge)
}

// recursiveThrough returns the subject types for which typ#relation is recursive
// through its own edge of kind self, which OpenFGA finds through rewrites and
// groupings of kind logical.
func (s strategies) recursiveThrough(typ, relation string, self, logical graph.EdgeType) []string {
	if s.wg == nil {
		return nil
	}
	node, ok := s.wg.GetNodeByID(typ + "#" + relation)
	if !ok || node.GetRecursiveRelation() != node.GetUniqueLabel() || node.IsPartOfTupleCycle() {
		return nil
	}
	var out []string
	for _, t := range s.types {
		if w, ok := node.GetWeight(t); ok && w == graph.Infinite && s.recursiveFor(node, t, self, logical) {
			out = append(out, t)
		}
	}
	return out
}

// recursiveFor walks node's edges for type t as OpenFGA does: node's own edge of kind
// self must be there, and every other edge weighing t must weigh 1.
func (s strategies) recursiveFor(node *graph.WeightedAuthorizationModelNode, t string, self, logical graph.EdgeType) bool {
	edges, ok := s.wg.GetEdgesFromNode(node)
	if !ok {
		return false
	}
	found := false
	for len(edges) > 0 {
		var inner []*graph.WeightedAuthorizationModelEdge
		for _, e := range edges {
			w, ok := e.GetWeight(t)
			if !ok {
				continue
			}
			if e.GetRecursiveRelation() == node.GetUniqueLabel() {
				if e.GetEdgeType() == self && e.GetTo() == node && !found {
					found = true
					continue
				}
				if e.GetEdgeType() == graph.RewriteEdge || e.GetEdgeType() == logical {
					more, ok := s.wg.GetEdgesFromNode(e.GetTo())
					if !ok {
						return false
					}
					inner = append(inner, more...)
					continue
				}
			}
			if w > 1 {
				return false
			}
		}
		edges = inner
	}
	return found
}
