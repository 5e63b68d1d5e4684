package engine

import (
	"container/heap"
	"context"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// LookupSubjects streams a permission's concrete subjects in ascending id order, with
// their answers, holding none of them, then its wildcards. A subject's answer, and
// which subjects a wildcard excludes, follow a set algebra that SpiceDB's answers fix
// (subjectSet in subjectsets_test.go, the reference the tests hold this lookup to):
// the lookup computes the same sets without holding them.
//
// It runs in two steps. The plan walks forwards from the resource through subject
// sets and arrows, under the depth limit, reading only the relationships that lead on
// (subject sets, arrows' tuplesets) and evaluating their caveats: its size is the
// intermediate objects reached, not the subjects found. Then each relation of an
// object that can name the subjects directly becomes a leaf, read from the store in
// subject id order with each relationship's caveat evaluated, and the leaves are
// merged: a union by a k-way merge, an intersection and a difference by merge-joins of
// their operands' streams, a caveated subject set or arrow by the caveat's outcome.
// Every leaf starts after After, so a page resumed from a cursor reads nothing of the
// pages before it.
//
// A node's wildcard is its W (the outcome of a wildcard that reaches it) and E (the
// subjects its wildcard excludes, in memory: what it is subtracted from, which the
// answer lists too). Nodes compute E only where a wildcard reaches, by the reference's
// operators, from their operands' W and E and single subjects' membership (contains).
// The plan joins unions two at a time, in the order the reference's walk does, so
// that E comes out as that walk's does.

// LookupSubjectsRequest asks for every subject of SubjectType (with SubjectRelation,
// "" for plain objects) that has Permission on Resource.
type LookupSubjectsRequest struct {
	Resource        rel.ObjectRef
	Permission      string
	SubjectType     string
	SubjectRelation string
	Context         map[string]any
	// After starts the answer's concrete subjects after this subject id.
	After string
}

// FoundSubject is one LookupSubjects result. A wildcard (ID "*") lists in Excluded the
// subjects it does not cover, each with how surely it is excluded.
type FoundSubject struct {
	ID       string
	Result   Result
	Excluded []FoundSubject
}

// depthMemo memoizes a walk forwards from the resource per (relation, object) under
// the depth limit: like SpiceDB's, such a walk fails with ErrMaxDepth on a chain of
// relations longer than the limit or on a cycle in the data (which a full traversal
// would follow until the limit), rather than costing time and memory in proportion to
// the data.
type depthMemo[T any] struct {
	memo map[memoKey]T
	// need is the depth each memoized value took: reused with less depth left, it
	// fails as computing it again would.
	need    map[memoKey]int
	onStack map[memoKey]bool
	// low is the least depth left at which the current computation reached a value.
	low int
}

func newDepthMemo[T any]() depthMemo[T] {
	return depthMemo[T]{memo: map[memoKey]T{}, need: map[memoKey]int{}, onStack: map[memoKey]bool{}}
}

// get returns the value of k with depth left, from the memo or from compute.
func (m *depthMemo[T]) get(ctx context.Context, k memoKey, depth int, compute func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if v, ok := m.memo[k]; ok {
		if m.need[k] > depth {
			return zero, ErrMaxDepth
		}
		m.low = min(m.low, depth-m.need[k]+1)
		return v, nil
	}
	if depth <= 0 || m.onStack[k] {
		return zero, ErrMaxDepth
	}
	m.onStack[k] = true
	defer delete(m.onStack, k)
	outer := m.low
	m.low = depth
	v, err := compute()
	if err != nil {
		return zero, err
	}
	m.memo[k], m.need[k] = v, depth-m.low+1
	m.low = min(outer, m.low)
	return v, nil
}

// SubjectWildcards reports whether a wildcard of the requested type may come in the
// answer to req (after every concrete subject): whether any relation the permission
// reaches allows one. It is false for a request LookupSubjects refuses.
func SubjectWildcards(s *ir.Schema, req LookupSubjectsRequest) bool {
	target, err := subjectsTarget(s, req)
	if err != nil || req.SubjectRelation != "" {
		return false
	}
	seen := map[*ir.Relation]bool{}
	var relation func(r *ir.Relation) bool
	var expr func(x *ir.Expr) bool
	relation = func(r *ir.Relation) bool {
		if r == nil || seen[r] {
			return false
		}
		seen[r] = true
		if r.IsPermission() {
			return expr(r.Rewrite)
		}
		for _, a := range r.Allowed {
			if a.Wildcard && a.Type == req.SubjectType || relation(a.Rel) {
				return true
			}
		}
		return false
	}
	expr = func(x *ir.Expr) bool {
		switch x.Kind {
		case ir.Ref:
			return relation(x.Rel)
		case ir.Arrow:
			for _, a := range x.TuplesetRel.Allowed {
				if relation(x.TargetOn(a.Def)) {
					return true
				}
			}
			return false
		}
		return slices.ContainsFunc(x.Children, expr)
	}
	return relation(target)
}

type planKind int

const (
	planUnion        planKind = iota // two children, or none (the empty set)
	planIntersection                 // two children
	planExclusion                    // the first child less the second
	planLeaf                         // the subjects relation rel of object id names directly
	planSelf                         // object id itself, as a subject set of the requested relation
	planCaveat                       // its child through a caveated relationship, whose outcome is cav
	planPermission                   // its child, a permission's rewrite, reported as one set
)

// planNode is one node of a subject lookup's plan. Relations of objects are memoized,
// so the plan is a graph without cycles in which one object's relation is one node.
type planNode struct {
	kind     planKind
	rel      *ir.Relation
	id       string
	children []*planNode
	cav      outcome
	// direct marks a relation's node, the union of the subjects its relationships name
	// (its leaf) and the subject sets they name (subs), whose wildcards are reported
	// apart (see parts).
	direct bool
	subs   []*planNode

	// walked is the last stream walk (subjectsRun.walks) that reached the node.
	walked int

	// The node's wildcard, once known: W, and E when W is not no.
	wildKnown bool
	wild      outcome
	excluded  results
}

// emptyPlan is a node without subjects, each its own: a node's wildcard is written
// when it is known.
func emptyPlan() *planNode { return &planNode{kind: planUnion} }

// union is the node of a union, joined two at a time from the left.
func union(subs ...*planNode) *planNode {
	if len(subs) == 0 {
		return emptyPlan()
	}
	return fold(planUnion, subs)
}

// fold is the left fold of subs by a two-operand kind. Its nodes and their children
// are allocated at once: a group's thousands of nested sets are one union.
func fold(kind planKind, subs []*planNode) *planNode {
	acc := subs[0]
	nodes := make([]planNode, len(subs)-1)
	children := make([]*planNode, 2*len(nodes))
	for i, sub := range subs[1:] {
		nodes[i] = planNode{kind: kind, children: children[2*i : 2*i+2 : 2*i+2]}
		nodes[i].children[0], nodes[i].children[1] = acc, sub
		acc = &nodes[i]
	}
	return acc
}

// subjectPlanner builds the plan of a subject lookup.
type subjectPlanner struct {
	ev      *evaluator // for caveats
	s       *ir.Schema
	r       store.Reader
	typ     string
	subjRel string
	nodes   depthMemo[*planNode]
}

func (p *subjectPlanner) relation(ctx context.Context, r *ir.Relation, id string, depth int) (*planNode, error) {
	return p.nodes.get(ctx, memoKey{r, id}, depth, func() (*planNode, error) {
		var n *planNode
		var err error
		if r.IsPermission() {
			var x *planNode
			if x, err = p.expr(ctx, r.Def, r.Rewrite, id, depth); err == nil {
				n = &planNode{kind: planPermission, children: []*planNode{x}}
			}
		} else {
			n, err = p.direct(ctx, r, id, depth)
		}
		if err != nil {
			return nil, err
		}
		return p.withSelf(r, id, n), nil
	})
}

// direct is the plan of relation r on id: a leaf when r allows the requested subjects,
// united with the union of the subject sets its relationships name.
func (p *subjectPlanner) direct(ctx context.Context, r *ir.Relation, id string, depth int) (*planNode, error) {
	if ids, longest, cyclic, ok := p.ev.indexedDescendants(ctx, r, id); ok {
		// The sets nested at any depth, from the index: each is planned as the subjects
		// it names alone, with no walk through the sets between, which fails as the walk
		// would, on a cycle or on a chain longer than the depth left.
		if cyclic || longest >= depth {
			return nil, ErrMaxDepth
		}
		p.nodes.low = min(p.nodes.low, depth-longest) // the depth the walk would reach
		subs := p.namedAll(r, ids)
		for i, c := range ids {
			subs[i] = p.withSelf(r, c, subs[i])
		}
		return directNode(p.named(r, id), subs), nil
	}
	// The subject sets, in key order: the types that can be subject sets, in order, and
	// each one's relationships.
	var types []string
	for _, a := range r.Allowed {
		if a.Rel != nil {
			types = append(types, a.Type)
		}
	}
	slices.Sort(types)
	var subs []*planNode
	for _, t := range slices.Compact(types) {
		f := store.Filter{ResourceType: r.Def.Name, ResourceIDs: []string{id}, Relation: r.Name, Subject: &store.SubjectFilter{Type: t}}
		for item, err := range p.r.Query(ctx, f, store.QueryOptions{}) {
			if err != nil {
				return nil, err
			}
			s := item.Relationship.Subject
			if s.Relation == "" || s.Object.ID == rel.Wildcard {
				continue
			}
			sub, err := p.relation(ctx, p.s.Definition(t).Relation(s.Relation), s.Object.ID, depth-1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, p.through(sub, item.Relationship.Caveat))
		}
	}
	return directNode(p.named(r, id), subs), nil
}

// named is the leaf of the subjects relation r on id names, when r allows the
// requested ones; else the empty set.
func (p *subjectPlanner) named(r *ir.Relation, id string) *planNode {
	if slices.ContainsFunc(r.Allowed, func(a ir.AllowedSubject) bool { return a.Type == p.typ && a.Relation == p.subjRel }) {
		return &planNode{kind: planLeaf, rel: r, id: id}
	}
	return emptyPlan()
}

// namedAll is named of r on each of ids, its leaves allocated at once.
func (p *subjectPlanner) namedAll(r *ir.Relation, ids []string) []*planNode {
	out := make([]*planNode, len(ids))
	if p.named(r, "").kind != planLeaf {
		for i := range out {
			out[i] = emptyPlan()
		}
		return out
	}
	leaves := make([]planNode, len(ids))
	for i, id := range ids {
		leaves[i] = planNode{kind: planLeaf, rel: r, id: id}
		out[i] = &leaves[i]
	}
	return out
}

// directNode is a relation's node: its leaf united with the subject sets it names.
func directNode(named *planNode, subs []*planNode) *planNode {
	n := union(named, union(append([]*planNode{emptyPlan()}, subs...)...))
	n.direct, n.subs = true, subs
	return n
}

// withSelf is n, the node of relation r on id, with the subject set r on id itself
// when that is a subject the lookup asks for: a subject set is a member of itself.
// (No wildcard has a relation, so none reaches this lookup, whose parts do not
// matter.)
func (p *subjectPlanner) withSelf(r *ir.Relation, id string, n *planNode) *planNode {
	if p.subjRel != "" && r.Def.Name == p.typ && r.Name == p.subjRel {
		return union(n, &planNode{kind: planSelf, id: id})
	}
	return n
}

func (p *subjectPlanner) expr(ctx context.Context, def *ir.Definition, x *ir.Expr, id string, depth int) (*planNode, error) {
	switch x.Kind {
	case ir.Ref:
		return p.relation(ctx, x.Rel, id, depth-1)
	case ir.Union, ir.Intersection, ir.Exclusion:
		subs := make([]*planNode, len(x.Children))
		for i, c := range x.Children {
			sub, err := p.expr(ctx, def, c, id, depth)
			if err != nil {
				return nil, err
			}
			subs[i] = sub
		}
		switch x.Kind {
		case ir.Intersection:
			return fold(planIntersection, subs), nil
		case ir.Exclusion:
			return fold(planExclusion, subs), nil
		}
		return union(subs...), nil
	case ir.Arrow:
		return p.arrow(ctx, def, x, id, depth)
	}
	return emptyPlan(), nil
}

// through is sub reached through a relationship with caveat c.
func (p *subjectPlanner) through(sub *planNode, c *rel.Caveat) *planNode {
	o := p.ev.caveat(c)
	if o.st == has {
		return sub
	}
	return &planNode{kind: planCaveat, children: []*planNode{sub}, cav: o}
}

// arrow is the plan of an arrow: the union of its target on each tupleset subject,
// or for an arrow to all their intersection (empty when there is none).
func (p *subjectPlanner) arrow(ctx context.Context, def *ir.Definition, x *ir.Expr, id string, depth int) (*planNode, error) {
	var subs []*planNode
	f := store.Filter{ResourceType: def.Name, ResourceIDs: []string{id}, Relation: x.Tupleset}
	for item, err := range p.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		s := item.Relationship.Subject.Object
		target := x.TargetOn(p.s.Definition(s.Type))
		sub := emptyPlan()
		if target != nil {
			if sub, err = p.relation(ctx, target, s.ID, depth-1); err != nil {
				return nil, err
			}
			sub = p.through(sub, item.Relationship.Caveat)
		} else if x.ArrowKind == ir.ArrowAny {
			continue
		}
		subs = append(subs, sub)
	}
	switch {
	case len(subs) == 0:
		return emptyPlan(), nil
	case x.ArrowKind == ir.ArrowAll:
		return fold(planIntersection, subs), nil
	}
	return union(subs...), nil
}

// LookupSubjects finds the subjects of the requested type that have the permission on
// the resource, in ascending id order after req.After, then the wildcards (see the
// top of this file). Subjects of a wildcard's part of the answer come as "*" with
// the subjects it excludes; yield returning an error stops the lookup with it.
func (e *Engine) LookupSubjects(ctx context.Context, s *ir.Schema, r store.Reader, req LookupSubjectsRequest, yield func(FoundSubject) error) error {
	target, err := subjectsTarget(s, req)
	if err != nil {
		return err
	}
	ev := newEvaluator(s, r, rel.SubjectRef{}, req.Context, shared{})
	ev.fga = e.sem == OpenFGA
	ev.index = e.index
	p := &subjectPlanner{ev: ev, s: s, r: r, typ: req.SubjectType, subjRel: req.SubjectRelation, nodes: newDepthMemo[*planNode]()}
	plan, err := p.relation(ctx, target, req.Resource.ID, e.maxDepth)
	if err != nil {
		return err
	}
	o := &subjectsRun{ctx: ctx, r: r, ev: ev, typ: req.SubjectType, subjRel: req.SubjectRelation}
	defer o.close()
	st := o.stream(plan, req.After)
	for {
		id, out, ok, err := st.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		res, err := toResult(out)
		if err != nil {
			return err
		}
		if err := yield(FoundSubject{ID: id, Result: res}); err != nil {
			return err
		}
	}
	// The wildcard of each part, as SpiceDB sends them.
	var wilds distinctWildcards
	for _, part := range parts(plan) {
		w, err := o.wildcard(part)
		if err != nil {
			return err
		}
		if err := wilds.yield(w, part.excluded, yield); err != nil {
			return err
		}
	}
	if len(ev.unmet) > 0 {
		return &MissingParamsError{Missing: mergeMissing(ev.unmet, nil)}
	}
	return nil
}

// distinctWildcards yields wildcards, each once: the same one twice says nothing more.
type distinctWildcards struct{ sent []FoundSubject }

// yield yields wildcard w (when it is not no) with its exclusions, in id order.
func (d *distinctWildcards) yield(w outcome, excluded results, yield func(FoundSubject) error) error {
	if w.st == no {
		return nil
	}
	res, err := toResult(w)
	if err != nil {
		return err
	}
	found := FoundSubject{ID: rel.Wildcard, Result: res}
	for _, id := range slices.Sorted(maps.Keys(excluded)) {
		r, err := toResult(excluded[id])
		if err != nil {
			return err
		}
		found.Excluded = append(found.Excluded, FoundSubject{ID: id, Result: r})
	}
	if slices.ContainsFunc(d.sent, func(f FoundSubject) bool { return reflect.DeepEqual(f, found) }) {
		return nil
	}
	d.sent = append(d.sent, found)
	return yield(found)
}

// parts lists the sets whose wildcards the lookup of n reports, as subjectSet's parts
// do: a relation's own subjects and, apart, those of each subject set its
// relationships name (a relation's, again in parts, each through the caveat of the
// relationship that names it); a permission's as one set.
func parts(n *planNode) []*planNode {
	switch {
	case n.kind == planCaveat:
		var out []*planNode
		for _, p := range parts(n.children[0]) {
			out = append(out, &planNode{kind: planCaveat, children: []*planNode{p}, cav: n.cav})
		}
		return out
	case !n.direct:
		return []*planNode{n}
	}
	var out []*planNode
	for _, sub := range n.subs {
		out = append(out, parts(sub)...)
	}
	return append(out, n.children[0]) // the leaf, or the empty set
}

// subjectsRun answers a lookup from its plan: its streams, its nodes'
// wildcards and single subjects' membership, and the store reads left open.
type subjectsRun struct {
	ctx     context.Context
	r       store.Reader
	ev      *evaluator // for caveats
	typ     string
	subjRel string
	stops   []func()
	walks   int // stream's walks so far, which mark the nodes they reach
}

func (o *subjectsRun) close() {
	for _, stop := range o.stops {
		stop()
	}
}

// leafFilter is the read of a leaf's subjects, of one id when id is not "".
func (o *subjectsRun) leafFilter(n *planNode, id string) store.Filter {
	sf := &store.SubjectFilter{Type: o.typ, Relation: o.subjRel, RelationSet: true}
	if id != "" {
		sf.IDs = []string{id}
	}
	return store.Filter{ResourceType: n.rel.Def.Name, ResourceIDs: []string{n.id}, Relation: n.rel.Name, Subject: sf}
}

// wildcard is n's W, computing its E when it is not no (subjectSet's operators).
func (o *subjectsRun) wildcard(n *planNode) (outcome, error) {
	if n.wildKnown {
		return n.wild, nil
	}
	var err error
	var w [2]outcome
	for i, c := range n.children {
		if w[i], err = o.wildcard(c); err != nil {
			return outNo, err
		}
	}
	switch n.kind {
	case planLeaf:
		if slices.ContainsFunc(n.rel.Allowed, func(a ir.AllowedSubject) bool { return a.Wildcard && a.Type == o.typ && o.subjRel == "" }) {
			if n.wild, err = o.leafHolds(n, rel.Wildcard); err != nil {
				return outNo, err
			}
		}
	case planUnion:
		if len(n.children) == 2 {
			n.wild = or(w[0], w[1])
		}
	case planIntersection:
		n.wild = and(w[0], w[1])
	case planExclusion:
		n.wild = and(w[0], not(w[1]))
	case planCaveat:
		n.wild = and(n.cav, w[0])
	case planPermission:
		n.wild = w[0]
	}
	n.wildKnown = true
	if n.wild.st != no {
		if n.excluded, err = o.exclusions(n); err != nil {
			return outNo, err
		}
	}
	return n.wild, nil
}

// exclusions is E of a node whose W is not no: for each subject its operands'
// wildcards treat apart (their E, and for a difference the subtrahend's subjects),
// the exclusion that leaves the wildcard covering it as far as the operator's
// operands do, where it is not a concrete subject without condition (subjectSet's
// exclude). A caveat or a permission keeps its child's E.
func (o *subjectsRun) exclusions(n *planNode) (results, error) {
	switch n.kind {
	case planCaveat, planPermission:
		return n.children[0].excluded, nil
	case planLeaf:
		return results{}, nil
	}
	keys := map[string]bool{}
	for _, c := range n.children {
		for id := range c.excluded { // a child's E (wildcard has run on each)
			keys[id] = true
		}
	}
	if n.kind == planExclusion {
		st := o.stream(n.children[1], "")
		for {
			id, _, ok, err := st.next()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			keys[id] = true
		}
	}
	excluded := results{}
	for id := range keys {
		part, err := o.wildPart(n, id)
		if err != nil {
			return nil, err
		}
		in, err := o.contains(n, id)
		if err != nil {
			return nil, err
		}
		excluded.put(id, and(exclusionFor(n.wild, part), not(in)))
	}
	return excluded, nil
}

// wildPart is how far n's operands' wildcards cover id, as the part function of
// subjectSet's exclude has it for n's operator.
func (o *subjectsRun) wildPart(n *planNode, id string) (outcome, error) {
	a, err := o.wildMember(n.children[0], id)
	if err != nil {
		return outNo, err
	}
	switch n.kind {
	case planUnion:
		b, err := o.wildMember(n.children[1], id)
		return or(a, b), err
	case planIntersection:
		b, err := o.wildMember(n.children[1], id)
		return and(a, b), err
	}
	b, err := o.member(n.children[1], id)
	return and(a, not(b)), err
}

// wildMember is id's outcome through n's wildcard alone.
func (o *subjectsRun) wildMember(n *planNode, id string) (outcome, error) {
	w, err := o.wildcard(n)
	if err != nil || w.st == no {
		return outNo, err
	}
	return and(w, not(n.excluded.get(id))), nil
}

// member is id's outcome in n, concrete or through its wildcard.
func (o *subjectsRun) member(n *planNode, id string) (outcome, error) {
	c, err := o.contains(n, id)
	if err != nil {
		return outNo, err
	}
	w, err := o.wildMember(n, id)
	return or(c, w), err
}

// contains is id's outcome among n's concrete subjects, those its stream yields.
func (o *subjectsRun) contains(n *planNode, id string) (outcome, error) {
	switch n.kind {
	case planLeaf:
		return o.leafHolds(n, id)
	case planSelf:
		if n.id == id {
			return outHas, nil
		}
		return outNo, nil
	case planCaveat:
		c, err := o.contains(n.children[0], id)
		return and(n.cav, c), err
	case planPermission:
		return o.contains(n.children[0], id)
	case planUnion:
		if len(n.children) == 0 {
			return outNo, nil
		}
	}
	a, b := n.children[0], n.children[1]
	ca, err := o.contains(a, id)
	if err != nil {
		return outNo, err
	}
	cb, err := o.contains(b, id)
	if err != nil {
		return outNo, err
	}
	if n.kind == planUnion {
		return or(ca, cb), nil
	}
	return o.pairOutcome(n, id, ca, cb)
}

// pairOutcome is id's concrete outcome in an intersection or difference n whose
// operands hold it as ca and cb (subjectSet's intersectSets and excludeSets).
func (o *subjectsRun) pairOutcome(n *planNode, id string, ca, cb outcome) (outcome, error) {
	a, b := n.children[0], n.children[1]
	wa, err := o.wildMember(a, id)
	if err != nil {
		return outNo, err
	}
	wb, err := o.wildMember(b, id)
	if err != nil {
		return outNo, err
	}
	if n.kind == planIntersection {
		return or(and(ca, cb), or(and(ca, wb), and(cb, wa))), nil
	}
	notB := not(or(cb, wb))
	out := and(ca, notB)
	if _, ok := b.excluded[id]; ok && a.wild.st != no {
		// b's wildcard excludes id: where a's covers it, it is a concrete subject.
		out = or(out, and(wa, notB))
	}
	return out, nil
}

// leafHolds is the outcome of the relationship of a leaf's relation that names
// subject id, no when there is none.
func (o *subjectsRun) leafHolds(n *planNode, id string) (outcome, error) {
	for item, err := range o.r.Query(o.ctx, o.leafFilter(n, id), store.QueryOptions{Limit: 1}) {
		if err != nil {
			return outNo, err
		}
		return o.ev.caveat(item.Relationship.Caveat), nil
	}
	return outNo, nil
}

// stream is the stream of n's concrete subjects after after. The nodes a union
// reaches through other unions (relations, arrows, subject sets) are merged at once,
// each leaf and each subject set once however many paths reach it.
func (o *subjectsRun) stream(n *planNode, after string) idStream {
	switch n.kind {
	case planIntersection, planExclusion:
		return &pairStream{o: o, n: n, a: o.stream(n.children[0], after), b: o.stream(n.children[1], after), after: after}
	case planCaveat:
		return &caveatStream{s: o.stream(n.children[0], after), c: n.cav}
	}
	var parts []idStream
	var others []*planNode // intersections, exclusions, caveats
	var selves []string
	var leaves [][]*planNode // by relation, in the order first reached
	o.walks++
	walk1 := o.walks
	var walk func(n *planNode)
	walk = func(n *planNode) {
		if n.walked == walk1 {
			return
		}
		n.walked = walk1
		switch n.kind {
		case planUnion, planPermission:
			for _, c := range n.children {
				walk(c)
			}
		case planLeaf:
			i := slices.IndexFunc(leaves, func(l []*planNode) bool { return l[0].rel == n.rel })
			if i < 0 {
				i, leaves = len(leaves), append(leaves, nil)
			}
			leaves[i] = append(leaves[i], n)
		case planSelf:
			if n.id > after {
				selves = append(selves, n.id)
			}
		default:
			others = append(others, n)
		}
	}
	walk(n)
	// Streamed after the walk, whose marks their own walks would overwrite.
	for _, n := range others {
		parts = append(parts, o.stream(n, after))
	}
	for _, l := range leaves {
		if len(l) < leafBatchMin {
			for _, n := range l {
				parts = append(parts, o.leaf(n, after))
			}
			continue
		}
		parts = append(parts, o.leafBatch(l, after))
	}
	if len(selves) > 0 {
		slices.Sort(selves)
		parts = append(parts, &sliceStream{ids: selves})
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return newMergeStream(parts)
}

// leafPrefetch is how many subjects a leaf reads when it opens: a leaf with no more
// closes its store read at once, so only leaves longer than this stay open.
const leafPrefetch = 32

// leaf opens the store read of a leaf's subjects after after, less a wildcard, each
// with its relationship's caveat evaluated.
func (o *subjectsRun) leaf(n *planNode, after string) idStream {
	f := o.leafFilter(n, "")
	var opts store.QueryOptions
	if after != "" {
		opts.After = store.NewCursorCodec(f).Encode(rel.Key{
			ResourceType: f.ResourceType, ResourceID: n.id, Relation: f.Relation,
			SubjectType: o.typ, SubjectID: after, SubjectRelation: o.subjRel,
		})
	}
	next, stop := iter.Pull2(o.r.Query(o.ctx, f, opts))
	l := &leafStream{ev: o.ev, more: next}
	for len(l.ahead) < leafPrefetch {
		id, c, ok, err := l.read()
		if !ok || err != nil {
			stop()
			l.more, l.err = nil, err
			return l
		}
		l.ahead = append(l.ahead, member{id, c})
	}
	o.stops = append(o.stops, stop)
	return l
}

// leafBatchMin is how many leaves of one relation a union must merge for them to be
// read as one (leafBatch).
const leafBatchMin = 8

// leafBatch is the stream of many leaves of one relation (a group's nested sets, which
// the index lists by the thousand): one store read of all their objects, whose
// subjects after after are sorted and each given once with its outcomes ORed, as the
// merge of the leaves' own streams would give them. It holds their subjects in memory,
// where the merge holds a few read ahead per leaf, and costs one read instead of a
// read, an open store iterator and a merge position per leaf (a top group's thousands
// of iterators held more than its subjects do).
func (o *subjectsRun) leafBatch(ns []*planNode, after string) idStream {
	f := o.leafFilter(ns[0], "")
	f.ResourceIDs = make([]string, len(ns))
	for i, n := range ns {
		f.ResourceIDs[i] = n.id
	}
	if !slices.IsSorted(f.ResourceIDs) { // an index's sets are
		rel.SortIDs(f.ResourceIDs) // which a store reads fastest
	}
	// The granted subjects apart, as ids alone, which sort faster than members.
	var granted []string
	var ms []member
	for item, err := range o.r.Query(o.ctx, f, store.QueryOptions{Unordered: true}) {
		if err != nil {
			return &leafStream{err: err}
		}
		switch id, c, ok := o.ev.subjectOf(&item.Relationship); {
		case !ok || id <= after:
		case c.st == has:
			granted = append(granted, id)
		default:
			ms = append(ms, member{id, c})
		}
	}
	rel.SortIDs(granted)
	granted = slices.Compact(granted)
	if len(ms) == 0 {
		out := make([]member, len(granted))
		for i, id := range granted {
			out[i] = member{id, outHas}
		}
		return &leafStream{ahead: out}
	}
	for _, id := range granted {
		ms = append(ms, member{id, outHas})
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.id, b.id) })
	out := ms[:0]
	for _, m := range ms {
		if last := len(out) - 1; last >= 0 && out[last].id == m.id {
			out[last].o = or(out[last].o, m.o)
		} else {
			out = append(out, m)
		}
	}
	return &leafStream{ahead: out}
}

// subjectOf is the subject a leaf's relationship x names and its outcome, or false
// for a wildcard (reported apart) and a relationship whose caveat does not hold.
func (ev *evaluator) subjectOf(x *rel.Relationship) (string, outcome, bool) {
	if x.Subject.Object.ID == rel.Wildcard {
		return "", outNo, false
	}
	c := ev.caveat(x.Caveat)
	return x.Subject.Object.ID, c, c.st != no
}

// idStream yields distinct subject ids in ascending order, each with its outcome
// (never no).
type idStream interface {
	next() (id string, o outcome, ok bool, err error)
}

// member is a subject id with its outcome.
type member struct {
	id string
	o  outcome
}

// leafStream is one leaf: the subjects it read ahead, then the rest of its store read.
type leafStream struct {
	ev    *evaluator // for caveats
	ahead []member
	err   error
	more  func() (store.Item, error, bool)
}

func (l *leafStream) next() (string, outcome, bool, error) {
	if len(l.ahead) > 0 {
		m := l.ahead[0]
		l.ahead = l.ahead[1:]
		return m.id, m.o, true, nil
	}
	if l.err != nil || l.more == nil {
		return "", outNo, false, l.err
	}
	id, c, ok, err := l.read()
	if !ok || err != nil {
		l.more, l.err = nil, err
	}
	return id, c, ok, err
}

// read reads the next subject of the store read, skipping a wildcard and subjects
// whose caveat does not hold.
func (l *leafStream) read() (string, outcome, bool, error) {
	for {
		item, err, ok := l.more()
		if !ok || err != nil {
			return "", outNo, false, err
		}
		if id, c, ok := l.ev.subjectOf(&item.Relationship); ok {
			return id, c, true, nil
		}
	}
}

// sliceStream yields sorted distinct ids held in memory, each granted.
type sliceStream struct{ ids []string }

func (s *sliceStream) next() (string, outcome, bool, error) {
	if len(s.ids) == 0 {
		return "", outNo, false, nil
	}
	id := s.ids[0]
	s.ids = s.ids[1:]
	return id, outHas, true, nil
}

// caveatStream is a stream through a caveated relationship: each outcome and the
// caveat's.
type caveatStream struct {
	s idStream
	c outcome
}

func (c *caveatStream) next() (string, outcome, bool, error) {
	for {
		id, o, ok, err := c.s.next()
		if !ok || err != nil {
			return id, o, ok, err
		}
		if o = and(c.c, o); o.st != no {
			return id, o, true, nil
		}
	}
}

// pairStream is the concrete subjects of an intersection or a difference, from the
// streams of its operands' concrete subjects, by the formulas of subjectSet's
// intersectSets and excludeSets:
//
//   - a and b: an id in both, or in one and covered by the other's wildcard;
//   - a less b: an id of a that is no member of b, and an id b's wildcard excludes
//     that a's wildcard covers and b does not hold.
type pairStream struct {
	o     *subjectsRun
	n     *planNode
	a, b  idStream
	after string

	started      bool
	headA, headB member
	okA, okB     bool
	// extra is, for a difference, the ids b's wildcard excludes after after, merged
	// into the answer where a's wildcard covers them.
	extra []string
}

func (p *pairStream) start() error {
	p.started = true
	var err error
	if p.headA.id, p.headA.o, p.okA, err = p.a.next(); err != nil {
		return err
	}
	if p.headB.id, p.headB.o, p.okB, err = p.b.next(); err != nil {
		return err
	}
	if p.n.kind == planExclusion {
		a, b := p.n.children[0], p.n.children[1]
		wa, err := p.o.wildcard(a)
		if err != nil {
			return err
		}
		if _, err := p.o.wildcard(b); err != nil {
			return err
		}
		if wa.st != no {
			for id := range b.excluded {
				if id > p.after {
					p.extra = append(p.extra, id)
				}
			}
			slices.Sort(p.extra)
		}
	}
	return nil
}

func (p *pairStream) next() (string, outcome, bool, error) {
	if !p.started {
		if err := p.start(); err != nil {
			return "", outNo, false, err
		}
	}
	for p.okA || p.okB || len(p.extra) > 0 {
		id := p.least()
		ca, cb := outNo, outNo
		if p.okA && p.headA.id == id {
			ca = p.headA.o
		}
		if p.okB && p.headB.id == id {
			cb = p.headB.o
		}
		fromExtra := len(p.extra) > 0 && p.extra[0] == id
		if err := p.advance(ca.st != no, cb.st != no, fromExtra); err != nil {
			return "", outNo, false, err
		}
		o, err := p.o.pairOutcome(p.n, id, ca, cb)
		if err != nil {
			return "", outNo, false, err
		}
		if o.st != no {
			return id, o, true, nil
		}
		if done, err := p.done(); err != nil || done {
			return "", outNo, false, err
		}
	}
	return "", outNo, false, nil
}

// done reports whether no id left can be kept: for a difference, once a and the ids
// b's wildcard excludes are through; for an intersection, once an operand without a
// wildcard is.
func (p *pairStream) done() (bool, error) {
	if p.n.kind == planExclusion {
		return !p.okA && len(p.extra) == 0, nil
	}
	for i, ok := range []bool{p.okA, p.okB} {
		if ok {
			continue
		}
		if w, err := p.o.wildcard(p.n.children[i]); err != nil || w.st == no {
			return true, err
		}
	}
	return false, nil
}

// least is the least id at the heads.
func (p *pairStream) least() string {
	var id string
	first := true
	for _, h := range []struct {
		id string
		ok bool
	}{{p.headA.id, p.okA}, {p.headB.id, p.okB}, {p.extraHead(), len(p.extra) > 0}} {
		if h.ok && (first || h.id < id) {
			id, first = h.id, false
		}
	}
	return id
}

func (p *pairStream) extraHead() string {
	if len(p.extra) == 0 {
		return ""
	}
	return p.extra[0]
}

func (p *pairStream) advance(inA, inB, fromExtra bool) error {
	var err error
	if inA {
		if p.headA.id, p.headA.o, p.okA, err = p.a.next(); err != nil {
			return err
		}
	}
	if inB {
		if p.headB.id, p.headB.o, p.okB, err = p.b.next(); err != nil {
			return err
		}
	}
	if fromExtra {
		p.extra = p.extra[1:]
	}
	return nil
}

// mergeStream merges streams into one, each id once with the union of its outcomes.
type mergeStream struct {
	parts []idStream // until the first next
	h     streamHeap
	err   error
}

func newMergeStream(parts []idStream) *mergeStream {
	return &mergeStream{parts: parts}
}

func (m *mergeStream) next() (string, outcome, bool, error) {
	if m.parts != nil {
		for _, p := range m.parts {
			id, o, ok, err := p.next()
			if ok {
				m.h = append(m.h, streamHead{member{id, o}, p})
			}
			if err != nil {
				m.err = err
			}
		}
		m.parts = nil
		heap.Init(&m.h)
	}
	for m.err == nil && len(m.h) > 0 {
		id, acc := m.h[0].id, outNo
		for m.err == nil && len(m.h) > 0 && m.h[0].id == id {
			acc = or(acc, m.h[0].o)
			if next, o, ok, err := m.h[0].s.next(); err != nil {
				m.err = err
			} else if ok {
				m.h[0].member = member{next, o}
				heap.Fix(&m.h, 0)
			} else {
				heap.Pop(&m.h)
			}
		}
		if m.err == nil {
			return id, acc, true, nil
		}
	}
	return "", outNo, false, m.err
}

// streamHeap orders streams by their next id.
type streamHeap []streamHead

type streamHead struct {
	member
	s idStream
}

func (h streamHeap) Len() int           { return len(h) }
func (h streamHeap) Less(i, j int) bool { return h[i].id < h[j].id }
func (h streamHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)        { *h = append(*h, x.(streamHead)) }
func (h *streamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// exclusionFor is the exclusion e for which and(wild, not(e)) is part, for a part no
// larger than wild. Where both are conditional on different parameters, the result's
// missing parameters are the union of both.
func exclusionFor(wild, part outcome) outcome {
	switch {
	case sameOutcome(wild, part):
		return outNo
	case part.st == no:
		return outHas
	default:
		return not(part)
	}
}

func sameOutcome(a, b outcome) bool {
	return a.st == b.st && slices.Equal(a.missing(), b.missing())
}
