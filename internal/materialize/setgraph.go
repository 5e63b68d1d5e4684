package materialize

import (
	"fmt"
	"slices"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// setGraph is what one schema and one configuration make permission sets of: the
// sets the Materialize API streams (`T:id#p`), and, for each relation, the sets its
// relationships put a member or a child set in.
//
// A set node `T#p` is a relation or a permission. A permission's set inlines the
// relations and permissions of its own object it is the union of (`view = viewer +
// editor` makes `document:d#view` hold what `viewer` and `editor` hold, as AuthZed's
// example streams `document:123#view` holding `user:123`), and an arrow `parent->view`
// makes `folder:f#view` a child set of `document:d#view` for each `document:d#parent@
// folder:f`. A relationship `T:id#r@U:u#q` to a subject set makes `U:u#q` a child set
// when `U#q` is a node; to an object (or a wildcard `U:*`), a member when the set
// streams members of type U. Caveated and expiring relationships make nothing: a
// permission set holds what is granted unconditionally (they are evaluated, and
// stream through WatchPermissions).
//
// The nodes are the index's recursive relations (all their member types) and the
// configured targets with every set on their paths (members of the targets' subject
// types). Intersections, exclusions and `.all()` arrows cannot be unions of sets: a
// target whose path has one is refused, and a recursive relation whose path has one
// is not streamed.
type setGraph struct {
	nodes map[relKey]*setNode
	// byRel lists, for each relation, the sets its relationships contribute to.
	byRel map[relKey][]contrib
	// types are the resource types of the nodes, sorted (the order of a lookup).
	types []string
	// sig is the graph written out: equal signatures stream the same sets from the
	// same relationships.
	sig string
	// down lists, for each node, the reads of an object's relationships that hold
	// its child sets; up, for each node, the reads of the relationships that make
	// one of its sets a child set (edgeRead; closure.go walks them).
	down, up map[relKey][]edgeRead
}

// setNode is one set node and where its children come from.
type setNode struct {
	key relKey
	// all: it streams members of every type; else only those in members.
	all     bool
	members map[string]bool
	// sources are the relations of the same object whose relationships make its
	// children: directly (arrow "") or, through an arrow, the tupleset's subjects'
	// sets named arrow.
	sources []source
	// next are the nodes its child sets are of.
	next []relKey
	// links are the ways its relationships make child sets.
	links []link
	// line is the node written out, for signatures.
	line string
}

type source struct{ rel, arrow string }

// link is one way a node's sets get child sets of node child: a relationship of
// relation rel of the set's object to a subject set of child (arrow ""), or, through
// an arrow, to an object of child's type whose set child.rel (= arrow) it then holds.
type link struct {
	rel, arrow string
	child      relKey
}

// contrib is one set a relation's relationships contribute to: set (a node of the
// relationship's resource type) directly, or through arrow.
type contrib struct{ set, arrow string }

// admits reports whether the node streams members of type t.
func (n *setNode) admits(t string) bool { return n.all || n.members[t] }

// newSetGraph builds the graph of s for targets, with the targets s cannot stream.
func newSetGraph(s *ir.Schema, targets []Target) (*setGraph, []*TargetError) {
	g := &setGraph{nodes: map[relKey]*setNode{}, byRel: map[relKey][]contrib{}, down: map[relKey][]edgeRead{}, up: map[relKey][]edgeRead{}}
	if s == nil {
		s = ir.NewSchema(nil, nil, nil)
	}
	var bad []*TargetError
	b := &graphBuilder{s: s, g: g}
	for _, r := range recursiveRelations(s) {
		// A recursive relation holding a set that is no union of sets (a subject set
		// of a permission with an exclusion) is left to evaluation: its sets would
		// not be exact.
		if unionOnly(r, map[*ir.Relation]bool{}) == "" {
			b.need(relKey{r.Def.Name, r.Name}, "")
		}
	}
	for _, t := range targets {
		if err := b.target(t); err != nil {
			bad = append(bad, err)
		}
	}
	for len(b.work) > 0 {
		k := b.work[len(b.work)-1]
		b.work = b.work[:len(b.work)-1]
		b.expand(g.nodes[k])
	}
	g.finish()
	return g, bad
}

type graphBuilder struct {
	s    *ir.Schema
	g    *setGraph
	work []relKey
}

// target adds t's node after checking t names what s has.
func (b *graphBuilder) target(t Target) *TargetError {
	d := b.s.Definition(t.Resource)
	if d == nil {
		return &TargetError{t, "resource type", fmt.Sprintf("no definition `%s`", t.Resource), b.s.UnknownDefinition(t.Resource)}
	}
	r := d.Relation(t.Permission)
	if r == nil {
		return &TargetError{
			t, "permission", fmt.Sprintf("definition `%s` has no relation or permission `%s`", t.Resource, t.Permission),
			&ir.UnknownRelationError{Definition: t.Resource, Name: t.Permission},
		}
	}
	if b.s.Definition(t.SubjectType) == nil {
		return &TargetError{t, "subject type", fmt.Sprintf("no definition `%s`", t.SubjectType), b.s.UnknownDefinition(t.SubjectType)}
	}
	if why := unionOnly(r, map[*ir.Relation]bool{}); why != "" {
		return &TargetError{t, "path", why + ", which permission sets (unions of sets) cannot express", nil}
	}
	if !reaches(r, t.SubjectType, map[*ir.Relation]bool{}) {
		return &TargetError{t, "subject type", fmt.Sprintf("no path of `%s#%s` reaches a subject of type `%s`", t.Resource, t.Permission, t.SubjectType), nil}
	}
	b.need(relKey{t.Resource, t.Permission}, t.SubjectType)
	return nil
}

// need makes k a node streaming members of type member ("": every type), queuing it
// to be expanded again when that is new.
func (b *graphBuilder) need(k relKey, member string) {
	n := b.g.nodes[k]
	if n == nil {
		n = &setNode{key: k, members: map[string]bool{}}
		b.g.nodes[k] = n
	} else if n.all || (member != "" && n.members[member]) {
		return
	}
	if member == "" {
		n.all = true
	} else {
		n.members[member] = true
	}
	b.work = append(b.work, k)
}

// expand finds n's sources and makes the sets they lead to nodes, with n's member types.
func (b *graphBuilder) expand(n *setNode) {
	r := b.s.Definition(n.key.def).Relation(n.key.rel)
	n.sources, n.next, n.links = n.sources[:0], n.next[:0], n.links[:0]
	b.walk(n, r, map[*ir.Relation]bool{})
}

// walk adds r's sources to n: r's own relationships when it is a relation, those of
// what its rewrite unions when it is a permission. Expressions unionOnly refuses are
// skipped (only the index's recursive relations, which are relations, and accepted
// targets get here).
func (b *graphBuilder) walk(n *setNode, r *ir.Relation, seen map[*ir.Relation]bool) {
	if seen[r] {
		return
	}
	seen[r] = true
	if !r.IsPermission() {
		n.addSource(source{r.Name, ""})
		for _, a := range r.Allowed {
			if a.Rel != nil {
				b.needFor(n, relKey{a.Type, a.Relation})
				n.addLink(link{r.Name, "", relKey{a.Type, a.Relation}})
			}
		}
		return
	}
	var visit func(x *ir.Expr)
	visit = func(x *ir.Expr) {
		switch x.Kind {
		case ir.Union:
			for _, c := range x.Children {
				visit(c)
			}
		case ir.Ref:
			b.walk(n, x.Rel, seen)
		case ir.Arrow:
			if x.ArrowKind != ir.ArrowAny {
				return
			}
			n.addSource(source{x.Tupleset, x.Target})
			for _, a := range x.TuplesetRel.Allowed {
				if t := x.TargetOn(a.Def); t != nil && !a.Wildcard {
					b.needFor(n, relKey{a.Type, t.Name})
					n.addLink(link{x.Tupleset, x.Target, relKey{a.Type, t.Name}})
				}
			}
		}
	}
	visit(r.Rewrite)
}

// needFor makes k a node with n's member types.
func (b *graphBuilder) needFor(n *setNode, k relKey) {
	if !slices.Contains(n.next, k) {
		n.next = append(n.next, k)
	}
	if n.all {
		b.need(k, "")
		return
	}
	for m := range n.members {
		b.need(k, m)
	}
}

func (n *setNode) addSource(s source) {
	if !slices.Contains(n.sources, s) {
		n.sources = append(n.sources, s)
	}
}

func (n *setNode) addLink(l link) {
	if !slices.Contains(n.links, l) {
		n.links = append(n.links, l)
	}
}

// unionOnly says why a set of r would not be a union of sets ("" when it would): r,
// or a set it holds (a subject set its relations admit, what its rewrite names, an
// arrow's target), is a permission with an intersection, an exclusion or an `.all()`
// arrow.
func unionOnly(r *ir.Relation, seen map[*ir.Relation]bool) string {
	if seen[r] {
		return ""
	}
	seen[r] = true
	if !r.IsPermission() {
		for _, a := range r.Allowed {
			if a.Rel != nil {
				if why := unionOnly(a.Rel, seen); why != "" {
					return why
				}
			}
		}
		return ""
	}
	var why string
	var visit func(x *ir.Expr)
	visit = func(x *ir.Expr) {
		if why != "" {
			return
		}
		switch x.Kind {
		case ir.Intersection:
			why = fmt.Sprintf("`%s#%s` has an intersection", r.Def.Name, r.Name)
		case ir.Exclusion:
			why = fmt.Sprintf("`%s#%s` has an exclusion", r.Def.Name, r.Name)
		case ir.Union:
			for _, c := range x.Children {
				visit(c)
			}
		case ir.Ref:
			why = unionOnly(x.Rel, seen)
		case ir.Arrow:
			if x.ArrowKind == ir.ArrowAll {
				why = fmt.Sprintf("`%s#%s` has an `.all()` arrow", r.Def.Name, r.Name)
				return
			}
			for _, a := range x.TuplesetRel.Allowed {
				if t := x.TargetOn(a.Def); t != nil && why == "" {
					why = unionOnly(t, seen)
				}
			}
		}
	}
	visit(r.Rewrite)
	return why
}

// reaches reports whether some path of r holds a subject of type t directly.
func reaches(r *ir.Relation, t string, seen map[*ir.Relation]bool) bool {
	if seen[r] {
		return false
	}
	seen[r] = true
	if !r.IsPermission() {
		for _, a := range r.Allowed {
			if a.Rel == nil && a.Type == t {
				return true
			}
			if a.Rel != nil && reaches(a.Rel, t, seen) {
				return true
			}
		}
		return false
	}
	var visit func(x *ir.Expr) bool
	visit = func(x *ir.Expr) bool {
		switch x.Kind {
		case ir.Union, ir.Intersection, ir.Exclusion:
			for i, c := range x.Children {
				if x.Kind == ir.Exclusion && i > 0 {
					break
				}
				if visit(c) {
					return true
				}
			}
		case ir.Ref:
			return reaches(x.Rel, t, seen)
		case ir.Arrow:
			for _, a := range x.TuplesetRel.Allowed {
				if tr := x.TargetOn(a.Def); tr != nil && reaches(tr, t, seen) {
					return true
				}
			}
		}
		return false
	}
	return visit(r.Rewrite)
}

// finish indexes the sources by relation and writes the signature.
func (g *setGraph) finish() {
	var lines []string
	types := map[string]bool{}
	for k, n := range g.nodes {
		types[k.def] = true
		slices.SortFunc(n.sources, func(a, b source) int { return strings.Compare(a.rel+"\x00"+a.arrow, b.rel+"\x00"+b.arrow) })
		for _, s := range n.sources {
			rk := relKey{k.def, s.rel}
			g.byRel[rk] = append(g.byRel[rk], contrib{k.rel, s.arrow})
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s#%s", k.def, k.rel)
		if n.all {
			b.WriteString(" *")
		} else {
			ms := make([]string, 0, len(n.members))
			for m := range n.members {
				ms = append(ms, m)
			}
			slices.Sort(ms)
			b.WriteString(" " + strings.Join(ms, ","))
		}
		for _, s := range n.sources {
			fmt.Fprintf(&b, " %s>%s", s.rel, s.arrow)
		}
		n.line = b.String()
		lines = append(lines, n.line)
		for _, l := range n.links {
			g.addReads(k, l)
		}
	}
	for k, cs := range g.byRel {
		slices.SortFunc(cs, func(a, b contrib) int { return strings.Compare(a.set+"\x00"+a.arrow, b.set+"\x00"+b.arrow) })
		g.byRel[k] = cs
	}
	for t := range types {
		g.types = append(g.types, t)
	}
	slices.Sort(g.types)
	slices.Sort(lines)
	g.sig = strings.Join(lines, "\n")
}

// SetRef names a permission set `type:id#relation`.
type SetRef struct{ Type, ID, Relation string }

func (r SetRef) String() string { return r.Type + ":" + r.ID + "#" + r.Relation }

// SetChild is a set's child: a member (Relation "" for an object, ID "*" for a
// wildcard) or, when IsSet, a child set.
type SetChild struct {
	Type, ID, Relation string
	IsSet              bool
}

// Pair is one (set, child) pair of the permission sets.
type Pair struct {
	Set   SetRef
	Child SetChild
}

func comparePairs(a, b Pair) int {
	for _, c := range [...]int{
		strings.Compare(a.Set.Type, b.Set.Type), strings.Compare(a.Set.ID, b.Set.ID),
		strings.Compare(a.Set.Relation, b.Set.Relation), boolCmp(a.Child.IsSet, b.Child.IsSet),
		strings.Compare(a.Child.Type, b.Child.Type), strings.Compare(a.Child.ID, b.Child.ID),
		strings.Compare(a.Child.Relation, b.Child.Relation),
	} {
		if c != 0 {
			return c
		}
	}
	return 0
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// pairsOf appends the pairs relationship x makes (whatever its caveat and expiration:
// the caller decides whether it counts).
func (g *setGraph) pairsOf(out []Pair, x *rel.Relationship) []Pair {
	for _, c := range g.byRel[relKey{x.Resource.Type, x.Relation}] {
		set := SetRef{x.Resource.Type, x.Resource.ID, c.set}
		subj := x.Subject
		switch {
		case c.arrow != "":
			if subj.Object.ID != rel.Wildcard && g.nodes[relKey{subj.Object.Type, c.arrow}] != nil {
				out = append(out, Pair{set, SetChild{subj.Object.Type, subj.Object.ID, c.arrow, true}})
			}
		case subj.Relation != "":
			if g.nodes[relKey{subj.Object.Type, subj.Relation}] != nil {
				out = append(out, Pair{set, SetChild{subj.Object.Type, subj.Object.ID, subj.Relation, true}})
			}
		default:
			if g.nodes[relKey{x.Resource.Type, c.set}].admits(subj.Object.Type) {
				out = append(out, Pair{set, SetChild{subj.Object.Type, subj.Object.ID, "", false}})
			}
		}
	}
	return out
}

// counts reports whether relationship x grants what it names to the permission sets:
// it is not caveated and does not expire.
func counts(x *rel.Relationship) bool { return x.Caveat == nil && x.Expiration == nil }

// targetSig is the part of g target t streams: the lines of the nodes reachable from
// its node ("" when t is not a node).
func (g *setGraph) targetSig(t Target) string {
	start := relKey{t.Resource, t.Permission}
	if g.nodes[start] == nil {
		return ""
	}
	seen := map[relKey]bool{start: true}
	queue := []relKey{start}
	var lines []string
	for i := 0; i < len(queue); i++ {
		n := g.nodes[queue[i]]
		lines = append(lines, n.line)
		for _, k := range n.next {
			if !seen[k] {
				seen[k] = true
				queue = append(queue, k)
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
