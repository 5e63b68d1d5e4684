package fga

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/openfga/language/pkg/go/graph"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// errNoPipeline says OpenFGA would not answer a ListObjects by its pipeline, or that
// the pipeline's answer is not modelled here: the caller answers otherwise.
var errNoPipeline = errors.New("not a pipeline ListObjects")

// pipelineObjects answers a ListObjects of the objects of typ on which the user
// subject (an object, not a subject set or a wildcard) has relation as OpenFGA
// v1.22.1 does by default where it has its weighted graph of the model: by its
// ListObjects pipeline, which walks that graph up from the subject, reading on each
// edge the tuples whose users are the objects found below, and which checks nothing.
// Its answers follow from the tuples alone, as sets (an `and` keeps what every
// operand found, a `but not` what its base found and its subtract did not), but a
// tuple it reads whose condition lacks a parameter fails the request, whether or not
// that tuple leads to an object of typ; a condition that does not hold drops its
// tuple. It reads a request's contextual tuples beside the stored ones of the same
// key. The ids come back sorted.
//
// It returns errNoPipeline where OpenFGA uses its other ListObjects (no weighted
// graph, a subject set or wildcard user) or where the graph has an `and` or
// `but not` on a cycle, whose answer in the pipeline is not modelled here.
func pipelineObjects(ctx context.Context, m *Model, r store.Reader, typ, relation string, subject rel.SubjectRef, reqCtx map[string]any) ([]string, error) {
	if m.graph == nil || subject.Relation != "" || subject.Object.ID == rel.Wildcard {
		return nil, errNoPipeline
	}
	root, ok := m.graph.GetNodeByID(typ + "#" + relation)
	if !ok {
		return nil, errNoPipeline
	}
	p := &pipeline{m: m, r: besideStored(r), reqCtx: reqCtx, subject: subject.Object, out: map[*wnode]map[string]bool{}}
	p.reach(root)
	for _, scc := range p.components(root) {
		if err := p.solve(ctx, scc); err != nil {
			return nil, err
		}
	}
	ids := make([]string, 0, len(p.out[root]))
	for obj := range p.out[root] {
		_, id, _ := strings.Cut(obj, ":")
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// besideStored returns r reading a request's contextual tuples beside the stored
// tuples of the same key, each with its own condition, as OpenFGA's ListObjects
// reads them (a Check's named user reads a contextual tuple in their place).
func besideStored(r store.Reader) store.Reader {
	if c, ok := r.(*withContextual); ok {
		return store.WithAdded(c.Reader, c.tuples, c.now)
	}
	return r
}

type (
	wnode = graph.WeightedAuthorizationModelNode
	wedge = graph.WeightedAuthorizationModelEdge
)

// pipeline is one ListObjects walk: the graph's nodes the subject can reach, each
// with the edges it reads them through, and each node's objects found so far.
type pipeline struct {
	m       *Model
	r       store.Reader
	reqCtx  map[string]any
	subject rel.ObjectRef
	edges   map[*wnode][]*wedge // the edges out of each reached node that weigh the subject's type
	out     map[*wnode]map[string]bool
}

// reach records the nodes reachable from root through edges that weigh the
// subject's type (or its wildcard), as the pipeline builds its workers: an edge
// that does not can lead to no object, and an operand behind one is empty.
func (p *pipeline) reach(root *wnode) {
	p.edges = map[*wnode][]*wedge{}
	stack := []*wnode{root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, seen := p.edges[n]; seen {
			continue
		}
		all, _ := p.m.graph.GetEdgesFromNode(n)
		p.edges[n] = make([]*wedge, 0, len(all))
		for _, e := range all {
			if !p.weighs(e) {
				p.edges[n] = append(p.edges[n], nil)
				continue
			}
			p.edges[n] = append(p.edges[n], e)
			stack = append(stack, e.GetTo())
		}
	}
}

// weighs reports whether e can lead to the subject's type; the graph weighs an edge
// to the type's wildcard under the type's name too.
func (p *pipeline) weighs(e *wedge) bool {
	_, ok := e.GetWeight(p.subject.Type)
	return ok
}

// components returns the strongly connected components of the reached nodes (Tarjan),
// each after every component its edges lead to: a node's objects are final once the
// components below it are solved.
func (p *pipeline) components(root *wnode) [][]*wnode {
	index, low := map[*wnode]int{}, map[*wnode]int{}
	onStack := map[*wnode]bool{}
	var stack []*wnode
	var out [][]*wnode
	var visit func(n *wnode)
	visit = func(n *wnode) {
		index[n], low[n] = len(index), len(index)
		stack = append(stack, n)
		onStack[n] = true
		for _, e := range p.edges[n] {
			if e == nil {
				continue
			}
			to := e.GetTo()
			if _, seen := index[to]; !seen {
				visit(to)
				low[n] = min(low[n], low[to])
			} else if onStack[to] {
				low[n] = min(low[n], index[to])
			}
		}
		if low[n] != index[n] {
			return
		}
		var scc []*wnode
		for {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[x] = false
			scc = append(scc, x)
			if x == n {
				break
			}
		}
		out = append(out, scc)
	}
	visit(root)
	return out
}

// solve finds the objects of a component's nodes from those of the components below.
// Unions (relations, groupings, `or`) take each object once, from any edge, and on a
// cycle are solved by passing on each node's new objects until there are none, each
// read once per object as the pipeline's deduplication reads it.
func (p *pipeline) solve(ctx context.Context, scc []*wnode) error {
	cyclic := len(scc) > 1 || slices.ContainsFunc(p.edges[scc[0]], func(e *wedge) bool { return e != nil && e.GetTo() == scc[0] })
	in := map[*wnode]bool{}
	for _, n := range scc {
		in[n] = true
		if isOperator(n, graph.IntersectionOperator) || isOperator(n, graph.ExclusionOperator) {
			if cyclic {
				return errNoPipeline
			}
			return p.operator(ctx, n)
		}
	}
	added := map[*wnode][]string{}
	for _, n := range scc {
		p.out[n] = map[string]bool{}
		found := p.leaf(n)
		var err error
		for _, e := range p.edges[n] {
			if err != nil || e == nil || in[e.GetTo()] {
				continue
			}
			var more []string
			more, err = p.interpret(ctx, e, slices.Collect(maps.Keys(p.out[e.GetTo()])))
			found = append(found, more...)
		}
		if err != nil {
			return err
		}
		added[n] = p.add(n, found)
	}
	for pending := true; pending; {
		pending = false
		next := map[*wnode][]string{}
		for _, n := range scc {
			for _, e := range p.edges[n] {
				if e == nil || !in[e.GetTo()] || len(added[e.GetTo()]) == 0 {
					continue
				}
				found, err := p.interpret(ctx, e, added[e.GetTo()])
				if err != nil {
					return err
				}
				next[n] = append(next[n], p.add(n, found)...)
			}
		}
		for _, n := range scc {
			pending = pending || len(next[n]) > 0
		}
		added = next
	}
	return nil
}

// leaf returns the objects a node of the subject's own type starts with: the subject
// for its type, its type's wildcard for the wildcard.
func (p *pipeline) leaf(n *wnode) []string {
	switch n.GetNodeType() {
	case graph.SpecificType:
		if n.GetLabel() == p.subject.Type {
			return []string{p.subject.Type + ":" + p.subject.ID}
		}
	case graph.SpecificTypeWildcard:
		return []string{n.GetLabel()}
	}
	return nil
}

// add records found on n and returns those n had not.
func (p *pipeline) add(n *wnode, found []string) []string {
	var fresh []string
	for _, o := range found {
		if !p.out[n][o] {
			p.out[n][o] = true
			fresh = append(fresh, o)
		}
	}
	return fresh
}

// operator solves an `and` (what every operand found) or a `but not` (what its base
// found less what its subtract found); an edge that cannot reach the subject's type
// is an empty operand.
func (p *pipeline) operator(ctx context.Context, n *wnode) error {
	var sets []map[string]bool
	for _, e := range p.edges[n] {
		set := map[string]bool{}
		if e != nil {
			found, err := p.interpret(ctx, e, slices.Collect(maps.Keys(p.out[e.GetTo()])))
			if err != nil {
				return err
			}
			for _, o := range found {
				set[o] = true
			}
		}
		sets = append(sets, set)
	}
	p.out[n] = map[string]bool{}
	if len(sets) == 0 {
		return nil
	}
	exclusion := isOperator(n, graph.ExclusionOperator)
	for o := range sets[0] {
		keep := true
		for _, s := range sets[1:] {
			keep = keep && s[o] != exclusion
		}
		if keep {
			p.out[n][o] = true
		}
	}
	return nil
}

func isOperator(n *wnode, op string) bool {
	return n.GetNodeType() == graph.OperatorNode && n.GetLabel() == op
}

// interpret returns the objects edge e leads to from the objects its target found:
// those of the tuples whose users they are, for a direct edge (a subject set's
// objects with its relation) and for `x from y` (the tuples of y); the objects
// themselves for the other edges.
func (p *pipeline) interpret(ctx context.Context, e *wedge, objects []string) ([]string, error) {
	if len(objects) == 0 {
		return nil, nil
	}
	var source, subjectRelation string
	switch e.GetEdgeType() {
	case graph.DirectEdge:
		source = e.GetRelationDefinition()
		if e.GetTo().GetNodeType() == graph.SpecificTypeAndRelation {
			_, subjectRelation, _ = strings.Cut(e.GetTo().GetLabel(), "#")
		}
	case graph.TTUEdge:
		source = e.GetTuplesetRelation()
	default:
		return objects, nil
	}
	typ, relation, _ := strings.Cut(source, "#")
	subjectType, _, _ := strings.Cut(objects[0], ":")
	ids := make([]string, len(objects))
	for i, o := range objects {
		_, ids[i], _ = strings.Cut(o, ":")
	}
	f := store.Filter{ResourceType: typ, Relation: StoredRelation(relation), Subject: &store.SubjectFilter{
		Type: subjectType, IDs: ids, Relation: subjectRelation, RelationSet: true,
	}}
	var out []string
	for item, err := range p.r.Query(ctx, f, store.QueryOptions{Unordered: true}) {
		if err != nil {
			return nil, err
		}
		ok, err := conditionHolds(p.m, p.reqCtx, item.Relationship.Caveat)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, typ+":"+item.Relationship.Resource.ID)
		}
	}
	return out, nil
}
