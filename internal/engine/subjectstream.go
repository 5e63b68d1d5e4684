package engine

import (
	"container/heap"
	"context"
	"iter"
	"maps"
	"reflect"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// An ordered subject lookup streams a permission's concrete subjects in ascending id
// order, holding neither the answer nor any part of it, then its wildcards. It applies
// where no relation the walk reaches allows a caveat (orderedSubjects): then every
// subject found is granted outright, and a permission's subjects are sets built by
// union, intersection and difference from the subjects relationships name, with the
// set algebra of subjectSet over booleans.
//
// It runs in two steps. The plan walks forwards from the resource through subject
// sets and arrows, under the depth limit as the set-algebra walk does, reading only
// the relationships that lead on (subject sets, arrows' tuplesets): its size is the
// intermediate objects reached, not the subjects found. Then each relation of an
// object that can name the subjects directly becomes a leaf, read from the store in
// subject id order, and the leaves are merged: a union by a k-way merge that drops
// repeats, an intersection and a difference by merge-joins of their operands'
// streams. Every leaf starts after After, so a page resumed from a cursor reads
// nothing of the pages before it.
//
// A wildcard is a node's W (does a wildcard reach it) and E (the subjects its wildcard
// excludes, in memory: the subjects of what it is subtracted from, which SpiceDB
// lists in the answer too). Nodes compute them only where a wildcard reaches, and
// test single subjects for membership (contains) to do it.

// orderedSubjects reports whether the subjects of target can be looked up in order
// (no relation reachable from it allows a caveat, and no arrow walks a wildcard), and
// whether a wildcard may be among them.
func orderedSubjects(target *ir.Relation, typ, subjRel string) (ordered, wildcards bool) {
	seen := map[*ir.Relation]bool{}
	caveats := false
	var relation func(r *ir.Relation) bool
	var expr func(x *ir.Expr) bool
	relation = func(r *ir.Relation) bool {
		if r == nil || seen[r] {
			return true
		}
		seen[r] = true
		if r.IsPermission() {
			return expr(r.Rewrite)
		}
		for _, a := range r.Allowed {
			if !relation(a.Rel) {
				return false
			}
			caveats = caveats || a.Caveat != ""
			wildcards = wildcards || a.Wildcard && a.Type == typ && subjRel == ""
		}
		return true
	}
	expr = func(x *ir.Expr) bool {
		switch x.Kind {
		case ir.Ref:
			return relation(x.Rel)
		case ir.Arrow:
			if !relation(x.TuplesetRel) {
				return false
			}
			for _, a := range x.TuplesetRel.Allowed {
				if a.Wildcard || !relation(x.TargetOn(a.Def)) {
					return false
				}
			}
			return true
		}
		for _, c := range x.Children {
			if !expr(c) {
				return false
			}
		}
		return true
	}
	ordered = relation(target) && !(caveats && wildcards)
	return ordered, ordered && wildcards
}

// SubjectsOrdered reports how LookupSubjects answers req: ordered, its concrete
// subjects in ascending id order after req.After, each granted without condition,
// then any wildcards; wildcards, whether a wildcard may come. Both are false for a
// request LookupSubjects refuses.
func SubjectsOrdered(s *ir.Schema, req LookupSubjectsRequest) (ordered, wildcards bool) {
	target, err := subjectsTarget(s, req)
	if err != nil {
		return false, false
	}
	return orderedSubjects(target, req.SubjectType, req.SubjectRelation)
}

type planKind int

const (
	planUnion planKind = iota
	planIntersection
	planExclusion
	planLeaf   // the subjects relation rel of object id names directly
	planSelf   // object id itself, as a subject set of the requested relation
	planCaveat // its child through a caveated relationship, whose outcome is cav
)

// planNode is one node of an ordered lookup's plan. Relations of objects are memoized,
// so the plan is a graph without cycles in which one object's relation is one node.
// Intersections and exclusions have two children, as subjectSet's operators take two
// sets.
type planNode struct {
	kind     planKind
	rel      *ir.Relation
	id       string
	children []*planNode
	// direct marks a relation's union of its leaf and the subject sets its
	// relationships name, whose wildcards are reported apart (see parts).
	direct bool
	cav    outcome

	// The node's wildcard, once known: wild is W; excluded is E, made only when W.
	wildKnown bool
	wild      bool
	excluded  map[string]bool
}

// emptyPlan is a node without subjects, each its own: a node's wildcard is written
// when it is known.
func emptyPlan() *planNode { return &planNode{kind: planUnion} }

// subjectPlanner builds the plan of an ordered lookup.
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
			// Its own node: a permission's subjects are reported as one set.
			var x *planNode
			if x, err = p.expr(ctx, r.Def, r.Rewrite, id, depth); err == nil {
				n = &planNode{kind: planUnion, children: []*planNode{x}}
			}
		} else {
			n, err = p.direct(ctx, r, id, depth)
		}
		if err != nil {
			return nil, err
		}
		if p.subjRel != "" && r.Def.Name == p.typ && r.Name == p.subjRel {
			// A subject set is a member of itself. (No wildcard has a relation, so
			// none reaches this lookup, whose parts do not matter.)
			n = &planNode{kind: planUnion, children: []*planNode{n, {kind: planSelf, id: id}}}
		}
		return n, nil
	})
}

// direct is the plan of relation r on id: a leaf when r allows the requested subjects,
// united with the subject sets its relationships name.
func (p *subjectPlanner) direct(ctx context.Context, r *ir.Relation, id string, depth int) (*planNode, error) {
	n := &planNode{kind: planUnion, direct: true}
	if slices.ContainsFunc(r.Allowed, func(a ir.AllowedSubject) bool { return a.Type == p.typ && a.Relation == p.subjRel }) {
		n.children = append(n.children, &planNode{kind: planLeaf, rel: r, id: id})
	}
	for i, a := range r.Allowed {
		if a.Rel == nil || slices.ContainsFunc(r.Allowed[:i], func(b ir.AllowedSubject) bool { return b.Rel == a.Rel }) {
			continue
		}
		f := store.Filter{
			ResourceType: r.Def.Name, ResourceIDs: []string{id}, Relation: r.Name,
			Subject: &store.SubjectFilter{Type: a.Type, Relation: a.Relation, RelationSet: true},
		}
		for item, err := range p.r.Query(ctx, f, store.QueryOptions{}) {
			if err != nil {
				return nil, err
			}
			sub, err := p.relation(ctx, a.Rel, item.Relationship.Subject.Object.ID, depth-1)
			if err != nil {
				return nil, err
			}
			if sub, err = p.through(sub, item.Relationship.Caveat); err != nil {
				return nil, err
			}
			n.children = append(n.children, sub)
		}
	}
	return n, nil
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
		return &planNode{kind: planUnion, children: subs}, nil
	case ir.Arrow:
		return p.arrow(ctx, def, x, id, depth)
	}
	return emptyPlan(), nil
}

// through is sub reached through a relationship with caveat c.
func (p *subjectPlanner) through(sub *planNode, c *rel.Caveat) (*planNode, error) {
	o, err := p.ev.caveat(c)
	if err != nil || o.st == has {
		return sub, err
	}
	return &planNode{kind: planCaveat, children: []*planNode{sub}, cav: o}, nil
}

// fold is the left fold of subs by a two-operand kind.
func fold(kind planKind, subs []*planNode) *planNode {
	acc := subs[0]
	for _, sub := range subs[1:] {
		acc = &planNode{kind: kind, children: []*planNode{acc, sub}}
	}
	return acc
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
			if sub, err = p.through(sub, item.Relationship.Caveat); err != nil {
				return nil, err
			}
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
	return &planNode{kind: planUnion, children: subs}, nil
}

// lookupSubjectsOrdered is LookupSubjects for a target orderedSubjects accepts.
func (e *Engine) lookupSubjectsOrdered(ctx context.Context, s *ir.Schema, r store.Reader, req LookupSubjectsRequest, target *ir.Relation, yield func(FoundSubject) error) error {
	ev := newEvaluator(s, r, rel.SubjectRef{}, req.Context, shared{})
	p := &subjectPlanner{ev: ev, s: s, r: r, typ: req.SubjectType, subjRel: req.SubjectRelation, nodes: newDepthMemo[*planNode]()}
	plan, err := p.relation(ctx, target, req.Resource.ID, e.maxDepth)
	if err != nil {
		return err
	}
	o := &orderedSubjectsRun{ctx: ctx, r: r, ev: ev, typ: req.SubjectType, subjRel: req.SubjectRelation}
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
	// The wildcard of each part, as SpiceDB sends them; the same one twice says nothing
	// more.
	var sent []FoundSubject
	for _, part := range parts(plan) {
		if w, err := o.wildcard(part); err != nil {
			return err
		} else if !w {
			continue
		}
		found := FoundSubject{ID: rel.Wildcard, Result: Result{Membership: HasPermission}}
		for _, id := range slices.Sorted(maps.Keys(part.excluded)) {
			found.Excluded = append(found.Excluded, FoundSubject{ID: id, Result: Result{Membership: HasPermission}})
		}
		if slices.ContainsFunc(sent, func(f FoundSubject) bool { return reflect.DeepEqual(f, found) }) {
			continue
		}
		sent = append(sent, found)
		if err := yield(found); err != nil {
			return err
		}
	}
	return nil
}

// parts lists the sets whose wildcards the lookup of n reports, as subjectSet's parts
// do: a relation's own subjects and, apart, those of each subject set its
// relationships name (a relation's, again in parts); a permission's as one set.
func parts(n *planNode) []*planNode {
	if !n.direct {
		return []*planNode{n}
	}
	var out []*planNode
	for _, c := range n.children {
		if c.kind == planLeaf {
			continue
		}
		out = append(out, parts(c)...)
	}
	for _, c := range n.children {
		if c.kind == planLeaf {
			out = append(out, c)
		}
	}
	return out
}

// orderedSubjectsRun answers an ordered lookup from its plan: its streams, its nodes'
// wildcards and single subjects' membership, and the store reads left open.
type orderedSubjectsRun struct {
	ctx     context.Context
	r       store.Reader
	ev      *evaluator // for caveats
	typ     string
	subjRel string
	stops   []func()
}

func (o *orderedSubjectsRun) close() {
	for _, stop := range o.stops {
		stop()
	}
}

// leafFilter is the read of a leaf's subjects, of one id when id is not "".
func (o *orderedSubjectsRun) leafFilter(n *planNode, id string) store.Filter {
	sf := &store.SubjectFilter{Type: o.typ, Relation: o.subjRel, RelationSet: true}
	if id != "" {
		sf.IDs = []string{id}
	}
	return store.Filter{ResourceType: n.rel.Def.Name, ResourceIDs: []string{n.id}, Relation: n.rel.Name, Subject: sf}
}

// wildcard is n's W, computing its E when it is true.
func (o *orderedSubjectsRun) wildcard(n *planNode) (bool, error) {
	if n.wildKnown {
		return n.wild, nil
	}
	var err error
	switch n.kind {
	case planLeaf:
		if slices.ContainsFunc(n.rel.Allowed, func(a ir.AllowedSubject) bool { return a.Wildcard && a.Type == o.typ && o.subjRel == "" }) {
			n.wild, err = o.leafHolds(n, rel.Wildcard)
		}
	case planUnion:
		// Every child's, whose E the union's E takes in.
		for _, c := range n.children {
			var w bool
			if w, err = o.wildcard(c); err != nil {
				break
			}
			n.wild = n.wild || w
		}
	case planIntersection, planExclusion:
		var a, b bool
		if a, err = o.wildcard(n.children[0]); err == nil && a {
			b, err = o.wildcard(n.children[1])
		}
		n.wild = a && (b == (n.kind == planIntersection))
	}
	if err != nil {
		return false, err
	}
	n.wildKnown = true
	if n.wild {
		if n.excluded, err = o.exclusions(n); err != nil {
			return false, err
		}
	}
	return n.wild, nil
}

// exclusions is E of a node whose W is true: for each subject its parts' wildcards
// treat apart (their E, and for a difference the subtrahend's subjects), excluded
// when the wildcard does not cover it and it is not a concrete subject (subjectSet's
// exclude).
func (o *orderedSubjectsRun) exclusions(n *planNode) (map[string]bool, error) {
	keys := map[string]bool{}
	for _, c := range n.children {
		maps.Copy(keys, c.excluded) // a child's E, when its W is true (wildcard has run)
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
	excluded := map[string]bool{}
	for id := range keys {
		covered, err := o.wildCovers(n, id)
		if err != nil {
			return nil, err
		}
		in := false
		if !covered {
			if in, err = o.contains(n, id); err != nil {
				return nil, err
			}
		}
		if !covered && !in {
			excluded[id] = true
		}
	}
	return excluded, nil
}

// wildCovers reports whether n's parts' wildcards cover id, as the part function of
// subjectSet's exclude has it.
func (o *orderedSubjectsRun) wildCovers(n *planNode, id string) (bool, error) {
	switch n.kind {
	case planUnion:
		for _, c := range n.children {
			if ok, err := o.wildMember(c, id); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case planIntersection:
		a, err := o.wildMember(n.children[0], id)
		if err != nil || !a {
			return false, err
		}
		return o.wildMember(n.children[1], id)
	}
	a, err := o.wildMember(n.children[0], id)
	if err != nil || !a {
		return false, err
	}
	b, err := o.member(n.children[1], id)
	return !b, err
}

// wildMember reports whether n's wildcard covers id.
func (o *orderedSubjectsRun) wildMember(n *planNode, id string) (bool, error) {
	w, err := o.wildcard(n)
	return w && !n.excluded[id], err
}

// wildOutcome is wildMember as an outcome.
func (o *orderedSubjectsRun) wildOutcome(n *planNode, id string) (outcome, error) {
	if w, err := o.wildMember(n, id); err != nil || !w {
		return outNo, err
	}
	return outHas, nil
}

// member reports whether id is a member of n, concrete or through its wildcard.
func (o *orderedSubjectsRun) member(n *planNode, id string) (bool, error) {
	if in, err := o.contains(n, id); err != nil || in {
		return in, err
	}
	return o.wildMember(n, id)
}

// contains reports whether id is one of n's concrete subjects, those its stream yields.
func (o *orderedSubjectsRun) contains(n *planNode, id string) (bool, error) {
	switch n.kind {
	case planLeaf:
		return o.leafHolds(n, id)
	case planSelf:
		return n.id == id, nil
	case planCaveat:
		if n.cav.st != has {
			return false, nil
		}
		return o.contains(n.children[0], id)
	case planUnion:
		for _, c := range n.children {
			if in, err := o.contains(c, id); err != nil || in {
				return in, err
			}
		}
		return false, nil
	}
	a, b := n.children[0], n.children[1]
	inA, err := o.contains(a, id)
	if err != nil {
		return false, err
	}
	if n.kind == planIntersection {
		// (a.C and b) or (b.C and a)
		if inA {
			return o.member(b, id)
		}
		inB, err := o.contains(b, id)
		if err != nil || !inB {
			return false, err
		}
		return o.wildMember(a, id)
	}
	// (a.C and not b) or (a's wildcard and id in b's E, and not b)
	inB, err := o.member(b, id)
	if err != nil || inB {
		return false, err
	}
	if inA {
		return true, nil
	}
	if wb, err := o.wildcard(b); err != nil || !wb || !b.excluded[id] {
		return false, err
	}
	return o.wildMember(a, id)
}

// leafHolds reports whether a leaf's relation names subject id.
func (o *orderedSubjectsRun) leafHolds(n *planNode, id string) (bool, error) {
	for _, err := range o.r.Query(o.ctx, o.leafFilter(n, id), store.QueryOptions{Limit: 1}) {
		return err == nil, err
	}
	return false, nil
}

// stream is the stream of n's concrete subjects after after. The nodes a union
// reaches through other unions (relations, arrows, subject sets) are merged at once,
// each leaf and each subject set once however many paths reach it.
func (o *orderedSubjectsRun) stream(n *planNode, after string) idStream {
	switch n.kind {
	case planIntersection, planExclusion:
		return &pairStream{o: o, n: n, a: o.stream(n.children[0], after), b: o.stream(n.children[1], after), after: after}
	case planCaveat:
		return &caveatStream{s: o.stream(n.children[0], after), c: n.cav}
	}
	var parts []idStream
	var selves []string
	seen := map[*planNode]bool{}
	var walk func(n *planNode)
	walk = func(n *planNode) {
		if seen[n] {
			return
		}
		seen[n] = true
		switch n.kind {
		case planUnion:
			for _, c := range n.children {
				walk(c)
			}
		case planLeaf:
			parts = append(parts, o.leaf(n, after))
		case planSelf:
			if n.id > after {
				selves = append(selves, n.id)
			}
		default:
			parts = append(parts, o.stream(n, after))
		}
	}
	walk(n)
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
func (o *orderedSubjectsRun) leaf(n *planNode, after string) idStream {
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
			l.err = err
			return l
		}
		l.ahead = append(l.ahead, member{id, c})
	}
	o.stops = append(o.stops, stop)
	return l
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
		x := &item.Relationship
		if x.Subject.Object.ID == rel.Wildcard {
			continue
		}
		c, err := l.ev.caveat(x.Caveat)
		if err != nil {
			return "", outNo, false, err
		}
		if c.st != no {
			return x.Subject.Object.ID, c, true, nil
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
	o     *orderedSubjectsRun
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
		wb, err := p.o.wildcard(b)
		if err != nil {
			return err
		}
		if wa && wb {
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
		o, err := p.outcome(id, ca, cb, fromExtra)
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
		if w, err := p.o.wildcard(p.n.children[i]); err != nil || !w {
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

// outcome is id's, where a's stream holds it as ca and b's as cb (no where they do
// not), and fromExtra when b's wildcard excludes it.
func (p *pairStream) outcome(id string, ca, cb outcome, fromExtra bool) (outcome, error) {
	a, b := p.n.children[0], p.n.children[1]
	wa, err := p.o.wildOutcome(a, id)
	if err != nil {
		return outNo, err
	}
	wb, err := p.o.wildOutcome(b, id)
	if err != nil {
		return outNo, err
	}
	if p.n.kind == planIntersection {
		return or(and(ca, cb), or(and(ca, wb), and(cb, wa))), nil
	}
	notB := not(or(cb, wb))
	o := and(ca, notB)
	if fromExtra {
		o = or(o, and(wa, notB))
	}
	return o, nil
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
