package fga

import (
	"context"
	"errors"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// reverseExpandObjects answers a ListObjects as OpenFGA v1.22.1 does where its
// pipeline does not (a wildcard or subject set user, a model without a weighted
// graph): by its reverse expansion, which walks up from the user through the model's
// relations to the requested one, reading on each step the tuples whose user is
// where it stands, then checks each object it reached through an `and`, a `but not`
// or an arrow whose relation involves one. An object reached otherwise is listed
// unchecked. A tuple it reads whose condition lacks a parameter fails the request
// (with OpenFGA's default result cap, which an answer of this size does not reach),
// as does a failing check; a condition that does not hold stops the walk there. The
// walk follows only the first operand of an `and` and the base of a `but not`, each
// subject set once per step it was reached by, and fails past OpenFGA's resolution
// depth. Contextual tuples are read beside stored ones of the same key.
//
// The objects come in the order the walk reaches them, each once.
func reverseExpandObjects(ctx context.Context, e *engine.Engine, m *Model, r store.Reader, req engine.LookupResourcesRequest) ([]string, error) {
	x := &reverseExpansion{
		m: m, r: besideStored(r), reqCtx: req.Context, types: m.types(),
		typ: req.ResourceType, relation: req.Permission,
		visited: map[string]bool{}, check: map[string]bool{},
	}
	if err := x.expand(ctx, req.Subject, "", false, 0); err != nil {
		return nil, err
	}
	if x.failed != nil {
		return nil, x.failed
	}
	var out []string
	for _, id := range x.found {
		if x.check[id] {
			res, err := e.Check(ctx, m.Schema, r, engine.CheckRequest{
				Resource: rel.ObjectRef{Type: req.ResourceType, ID: id}, Permission: req.Permission, Subject: req.Subject, Context: req.Context,
			})
			if err != nil {
				return nil, err
			}
			ok, err := Allowed(res)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, id)
	}
	return out, nil
}

// reverseExpansion is one ListObjects' reverse expansion towards typ#relation.
type reverseExpansion struct {
	m             *Model
	r             store.Reader
	reqCtx        map[string]any
	types         map[string]*openfgav1.TypeDefinition
	typ, relation string
	visited       map[string]bool // subject sets expanded, with the step that reached them
	found         []string        // the objects reached, in order
	check         map[string]bool // each object reached: whether it needs a check (as first reached)
	failed        error           // the conditions that failed to evaluate
}

// step is one way up from where the walk stands: to the tuples of typ#relation whose
// user it is (direct), to its own relation rewritten as typ#relation (computed), or
// to the tuples of typ#tupleset naming its object, for typ#relation's `x from
// tupleset` (arrow). check marks a step through an `and` or `but not`.
type step struct {
	kind                    stepKind
	typ, relation, tupleset string
	check                   bool
}

type stepKind int

const (
	directStep stepKind = iota
	computedStep
	arrowStep
)

func (s step) key() string {
	return string(rune('0'+s.kind)) + s.typ + "#" + s.relation + "#" + s.tupleset
}

// expand walks up from subject, reached by the step with key via ("" at the start),
// depth steps from the user; check says a step on the way needs the objects checked.
func (x *reverseExpansion) expand(ctx context.Context, subject rel.SubjectRef, via string, check bool, depth int) error {
	if depth > engine.OpenFGAMaxDepth {
		return engine.ErrMaxDepth
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if subject.Relation != "" {
		if subject.Object.Type == x.typ && subject.Relation == x.relation {
			if _, ok := x.check[subject.Object.ID]; !ok {
				x.check[subject.Object.ID] = check
				x.found = append(x.found, subject.Object.ID)
			}
		}
		if via != "" {
			k := subject.Object.Type + ":" + subject.Object.ID + "@" + via
			if x.visited[k] {
				return nil
			}
			x.visited[k] = true
		}
	}
	for _, s := range x.steps(x.typ, x.relation, subject, map[string]bool{}) {
		var next []rel.SubjectRef
		switch s.kind {
		case computedStep:
			next = []rel.SubjectRef{{Object: subject.Object, Relation: s.relation}}
		default:
			objects, err := x.read(ctx, s, subject)
			if err != nil {
				return err
			}
			for _, o := range objects {
				next = append(next, rel.SubjectRef{Object: o, Relation: s.relation})
			}
		}
		for _, n := range next {
			if err := x.expand(ctx, n, s.key(), check || s.check, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// read returns the objects of the tuples step s reads for subject whose conditions
// hold, recording those that failed to evaluate.
func (x *reverseExpansion) read(ctx context.Context, s step, subject rel.SubjectRef) ([]rel.ObjectRef, error) {
	f := store.Filter{ResourceType: s.typ, Relation: StoredRelation(s.tupleset), Subject: &store.SubjectFilter{
		Type: subject.Object.Type, IDs: []string{subject.Object.ID}, RelationSet: true,
	}}
	if s.kind == directStep {
		f.Relation = StoredRelation(s.relation)
		f.Subject.Relation = subject.Relation
		switch {
		case subject.Relation != "":
		case subject.Object.ID == rel.Wildcard:
		case x.public(s.typ, s.relation, subject.Object.Type):
			f.Subject.IDs = append(f.Subject.IDs, rel.Wildcard)
		}
	}
	var out []rel.ObjectRef
	for item, err := range x.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		ok, err := conditionHolds(x.m, x.reqCtx, item.Relationship.Caveat)
		if err != nil {
			x.failed = errors.Join(x.failed, err)
			continue
		}
		if ok {
			out = append(out, item.Relationship.Resource)
		}
	}
	return out, nil
}

// public reports whether typ#relation admits the wildcard of userType.
func (x *reverseExpansion) public(typ, relation, userType string) bool {
	direct, _ := x.m.Relation(typ, relation)
	for _, ref := range direct {
		if ref.GetType() == userType && ref.GetWildcard() != nil {
			return true
		}
	}
	return false
}

// steps returns the first steps up from subject on the way to typ#relation, as
// OpenFGA's relationship graph prunes them: through every operand of `or`, the first
// of `and` and the base of `but not` (both marking their steps to be checked); each
// relation is looked into once (visited).
func (x *reverseExpansion) steps(typ, relation string, subject rel.SubjectRef, visited map[string]bool) []step {
	u, ok := x.unvisited(typ, relation, visited)
	if !ok {
		return nil
	}
	return x.rewriteSteps(typ, relation, u, subject, visited)
}

// unvisited marks typ#relation visited and returns its rewrite, or false when it was
// visited already or the model has no such relation.
func (x *reverseExpansion) unvisited(typ, relation string, visited map[string]bool) (*openfgav1.Userset, bool) {
	key := typ + "#" + relation
	if visited[key] {
		return nil, false
	}
	visited[key] = true
	u, ok := x.types[typ].GetRelations()[relation]
	return u, ok
}

func (x *reverseExpansion) rewriteSteps(typ, relation string, u *openfgav1.Userset, subject rel.SubjectRef, visited map[string]bool) []step {
	var out []step
	switch us := u.GetUserset().(type) {
	case *openfgav1.Userset_This:
		direct, _ := x.m.Relation(typ, relation)
		for _, ref := range direct {
			if ref.GetType() == subject.Object.Type && (sameReference(ref, subject) || ref.GetWildcard() != nil) {
				out = append(out, step{kind: directStep, typ: typ, relation: relation})
				break
			}
		}
		for _, ref := range direct {
			if ref.GetRelation() != "" {
				out = append(out, x.steps(ref.GetType(), ref.GetRelation(), subject, visited)...)
			}
		}
	case *openfgav1.Userset_ComputedUserset:
		to := us.ComputedUserset.GetRelation()
		if typ == subject.Object.Type && to == subject.Relation {
			out = append(out, step{kind: computedStep, typ: typ, relation: relation})
		}
		out = append(out, x.steps(typ, to, subject, visited)...)
	case *openfgav1.Userset_TupleToUserset:
		tupleset, _ := x.m.Relation(typ, us.TupleToUserset.GetTupleset().GetRelation())
		to := us.TupleToUserset.GetComputedUserset().GetRelation()
		for _, ref := range tupleset {
			if _, ok := x.m.Relation(ref.GetType(), to); !ok {
				continue
			}
			if ref.GetType() == subject.Object.Type && to == subject.Relation {
				out = append(out, step{
					kind: arrowStep, typ: typ, relation: relation, tupleset: us.TupleToUserset.GetTupleset().GetRelation(),
					check: x.involves(ref.GetType(), to, false, map[string]bool{}) || x.involves(ref.GetType(), to, true, map[string]bool{}),
				})
			}
			out = append(out, x.steps(ref.GetType(), to, subject, visited)...)
		}
	case *openfgav1.Userset_Union:
		for _, c := range us.Union.GetChild() {
			out = append(out, x.rewriteSteps(typ, relation, c, subject, visited)...)
		}
	case *openfgav1.Userset_Intersection:
		out = checked(x.rewriteSteps(typ, relation, us.Intersection.GetChild()[0], subject, visited))
	case *openfgav1.Userset_Difference:
		out = checked(x.rewriteSteps(typ, relation, us.Difference.GetBase(), subject, visited))
	}
	return out
}

func checked(steps []step) []step {
	for i := range steps {
		steps[i].check = true
	}
	return steps
}

// sameReference reports whether type restriction ref names subject's kind of user:
// a plain object, the wildcard, or the same subject set relation.
func sameReference(ref *openfgav1.RelationReference, subject rel.SubjectRef) bool {
	switch {
	case subject.Relation != "":
		return ref.GetRelation() == subject.Relation
	case subject.Object.ID == rel.Wildcard:
		return ref.GetWildcard() != nil
	}
	return ref.GetRelation() == "" && ref.GetWildcard() == nil
}

// involves reports whether typ#relation involves an `and` (exclusion false) or a `but
// not` (exclusion true) as OpenFGA decides it: the first operator its rewrite meets,
// in order through computed relations and arrows, decides (an `and` when looking for
// a `but not` says no); failing that, the subject sets of its type restrictions.
func (x *reverseExpansion) involves(typ, relation string, exclusion bool, visited map[string]bool) bool {
	u, ok := x.unvisited(typ, relation, visited)
	if !ok {
		return false
	}
	if decided, yes := x.rewriteInvolves(typ, u, exclusion, visited); decided && yes {
		return true
	}
	direct, _ := x.m.Relation(typ, relation)
	for _, ref := range direct {
		if ref.GetRelation() != "" && x.involves(ref.GetType(), ref.GetRelation(), exclusion, visited) {
			return true
		}
	}
	return false
}

// rewriteInvolves walks u for involves: decided is true once an operator, or a
// relation involving one, answered yes.
func (x *reverseExpansion) rewriteInvolves(typ string, u *openfgav1.Userset, exclusion bool, visited map[string]bool) (decided, yes bool) {
	switch us := u.GetUserset().(type) {
	case *openfgav1.Userset_ComputedUserset:
		if x.involves(typ, us.ComputedUserset.GetRelation(), exclusion, visited) {
			return true, true
		}
	case *openfgav1.Userset_TupleToUserset:
		tupleset, _ := x.m.Relation(typ, us.TupleToUserset.GetTupleset().GetRelation())
		for _, ref := range tupleset {
			if x.involves(ref.GetType(), us.TupleToUserset.GetComputedUserset().GetRelation(), exclusion, visited) {
				return true, true
			}
		}
	case *openfgav1.Userset_Union:
		for _, c := range us.Union.GetChild() {
			if decided, yes := x.rewriteInvolves(typ, c, exclusion, visited); decided {
				return decided, yes
			}
		}
	case *openfgav1.Userset_Intersection:
		return true, !exclusion
	case *openfgav1.Userset_Difference:
		return true, exclusion
	}
	return false, false
}
