package engine

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// edge is a stored relationship reduced to what evaluation needs: the resource it
// starts from, the object it points to (of type typ), its caveat and when it expires
// (nil: never).
type edge struct {
	resource string
	target   string
	typ      string
	caveat   *rel.Caveat
	expires  *time.Time
}

// direct answers relation r (not a permission) over ids: relationships naming the
// subject itself or a wildcard of its type, then subject sets (`group#member`),
// followed recursively in one batch per subject type and relation.
func (ev *evaluator) direct(ctx context.Context, r *ir.Relation, ids []string, depth int) (results, error) {
	out := results{}
	if err := ev.directMatches(ctx, r, ids, out); err != nil {
		return nil, err
	}
	if sets, reads, ok := ev.recursive(r); ok {
		var pending []string
		for _, id := range ids {
			if out.get(id).st != has {
				pending = append(pending, id)
			}
		}
		if err := ev.followRecursive(ctx, r, sets, reads, pending, depth, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	var pending []string
	for i, a := range r.Allowed {
		if a.Relation == "" || a.Wildcard || slices.ContainsFunc(r.Allowed[:i], func(b ir.AllowedSubject) bool {
			return !b.Wildcard && b.Type == a.Type && b.Relation == a.Relation
		}) {
			continue
		}
		if pending == nil {
			pending = make([]string, 0, len(ids))
			for _, id := range ids {
				if out.get(id).st != has {
					pending = append(pending, id)
				}
			}
		}
		if len(pending) == 0 {
			break
		}
		// The read is over before followSets (whose reads reuse the scratch) begins.
		sf := &ev.scratch.subject
		*sf = store.SubjectFilter{Type: a.Type, Relation: a.Relation, RelationSet: true}
		f := store.Filter{ResourceType: r.Def.Name, ResourceIDs: pending, Relation: r.Name, Subject: sf}
		edges, err := ev.edges(ctx, f)
		if err != nil {
			return nil, err
		}
		if err := ev.followSets(ctx, a, edges, depth, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// followSets follows the subject sets of allowed entry a that edges point to, ORing
// what they grant into out, or, where OpenFGA reads them from the subject's side
// (weight2.go), ORs in that read's verdict on each.
func (ev *evaluator) followSets(ctx context.Context, a ir.AllowedSubject, edges []edge, depth int, out results) error {
	plan, ok := ev.weight2Userset(a)
	if !ok {
		return ev.follow(ctx, a.Rel, edges, depth, out, or)
	}
	side, err := ev.sideOf(ctx, plan)
	if err != nil {
		return err
	}
	for _, e := range edges {
		out.put(e.resource, or(out.get(e.resource), side.verdict(e.target)))
	}
	return nil
}

// directMatches finds relationships whose subject is the checked subject or a wildcard
// of its type, and ORs their caveat outcomes into out.
func (ev *evaluator) directMatches(ctx context.Context, r *ir.Relation, ids []string, out results) error {
	subj := ev.subject
	subjIDs := ev.scratch.subjIDs[:0]
	for _, a := range r.Allowed {
		if a.Type != subj.Object.Type {
			continue
		}
		if a.Wildcard {
			subjIDs = appendOnce(subjIDs, rel.Wildcard)
		} else if a.Relation == subj.Relation {
			subjIDs = appendOnce(subjIDs, subj.Object.ID)
		}
	}
	if len(subjIDs) == 0 {
		return nil
	}
	sf := &ev.scratch.subject
	*sf = store.SubjectFilter{Type: subj.Object.Type, IDs: subjIDs}
	if subj.Relation == "" || !slices.Contains(subjIDs, rel.Wildcard) {
		// Every key the read wants is named whole (a wildcard's subject relation is
		// always ""), so a store can look each one up rather than scan the group.
		sf.Relation, sf.RelationSet = subj.Relation, true
	}
	f := store.Filter{ResourceType: r.Def.Name, ResourceIDs: ids, Relation: r.Name, Subject: sf}
	ev.visit = readVisitor{ev: ev, kind: readMatches, matches: out}
	err := store.Each(ctx, ev.r, f, store.QueryOptions{}, &ev.visit)
	ev.visit = readVisitor{}
	return err
}

// readVisitor receives the results of one of the evaluator's reads (kind). The
// evaluator keeps one, so that handing it to the store allocates nothing.
type readVisitor struct {
	ev       *evaluator
	kind     readKind
	matches  results
	edges    []edge
	tupleset tuplesetKey // its id is set per relationship
}

type readKind int

const (
	// readEdges appends each relationship to edges, as an edge (edges).
	readEdges readKind = iota
	// readMatches ORs into matches the caveat outcome of each relationship with the
	// checked subject (directMatches).
	readMatches
	// readTupleset adds each relationship to the evaluator's tuplesets (hops).
	readTupleset
)

func (v *readVisitor) Visit(item store.Item) bool {
	ev, x := v.ev, &item.Relationship
	switch v.kind {
	case readMatches:
		if x.Subject.Object.ID != rel.Wildcard && x.Subject.Relation != ev.subject.Relation {
			return true
		}
		ev.tr.read(x.Expiration)
		o := ev.caveat(x.Caveat)
		id := x.Resource.ID
		ev.tr.caveat(ev, id, x.Caveat, o)
		v.matches.put(id, or(v.matches.get(id), o))
	case readTupleset:
		k := v.tupleset
		k.id = x.Resource.ID
		ev.tuplesets[k] = append(ev.tuplesets[k], edgeOf(x))
	default:
		ev.tr.read(x.Expiration)
		v.edges = append(v.edges, edgeOf(x))
	}
	return true
}

// follow evaluates target on the objects edges point to and combines each edge's
// outcome (its caveat AND the target's answer) into out with op.
func (ev *evaluator) follow(ctx context.Context, target *ir.Relation, edges []edge, depth int, out results, op func(a, b outcome) outcome) error {
	if len(edges) == 0 {
		return nil
	}
	targets := make([]string, 0, len(edges))
	for _, e := range edges {
		targets = append(targets, e.target)
	}
	res, err := ev.relation(ctx, target, dedupe(targets), depth-1)
	if err != nil {
		return err
	}
	for _, e := range edges {
		o := res.get(e.target)
		if o.st != no && e.caveat != nil {
			c := ev.caveat(e.caveat)
			ev.tr.caveat(ev, e.resource, e.caveat, c)
			o = and(c, o)
		}
		out.put(e.resource, op(out.get(e.resource), o))
	}
	return nil
}

// edges reads the relationships matching f.
func (ev *evaluator) edges(ctx context.Context, f store.Filter) ([]edge, error) {
	ev.visit = readVisitor{ev: ev, kind: readEdges}
	err := store.Each(ctx, ev.r, f, store.QueryOptions{}, &ev.visit)
	out := ev.visit.edges
	ev.visit = readVisitor{}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// edgeOf reduces a relationship to its edge.
func edgeOf(r *rel.Relationship) edge {
	return edge{resource: r.Resource.ID, target: r.Subject.Object.ID, typ: r.Subject.Object.Type, caveat: r.Caveat, expires: r.Expiration}
}

// caveat evaluates a relationship's caveat with the request context, the
// relationship's own context taking precedence. A caveat that fails to evaluate is
// an outcome (evalErr), not an error: the operators above it decide whether it can
// change the answer.
func (ev *evaluator) caveat(c *rel.Caveat) outcome {
	if c == nil {
		return outHas
	}
	def := ev.s.Caveat(c.Name)
	if def == nil {
		return caveatErr(c.Name, errUnknownCaveat)
	}
	merged := ev.reqCtx
	if len(c.Context) > 0 {
		merged = make(map[string]any, len(ev.reqCtx)+len(c.Context))
		maps.Copy(merged, ev.reqCtx)
		maps.Copy(merged, c.Context)
	}
	converted, err := def.Compiled.ConvertContext(merged)
	if err != nil {
		return caveatErr(c.Name, err)
	}
	if ev.fga {
		// OpenFGA evaluates a condition only with every parameter given, even
		// where the given ones would decide it.
		var absent []string
		for _, p := range def.Params {
			if _, ok := converted[p.Name]; !ok {
				absent = append(absent, p.Name)
			}
		}
		if len(absent) > 0 {
			ev.unmet = append(ev.unmet, absent...)
			return condOn(mergeMissing(absent, nil))
		}
	}
	res, err := def.Compiled.Eval(converted)
	if err != nil {
		return caveatErr(c.Name, err)
	}
	switch {
	case len(res.Missing) > 0:
		return condOn(res.Missing)
	case res.Satisfied:
		return outHas
	default:
		return outNo
	}
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
