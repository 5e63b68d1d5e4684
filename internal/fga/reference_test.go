package fga

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
)

// refChecker is a small, obviously correct evaluator of OpenFGA's check semantics as
// its source states them: recursion along each path with the tuples visited on it,
// a tuple met again on its own path answering false for that branch, the depth
// limit counted per dispatch (computed relation, tupleset object, subject set), no
// memo and no batching.
type refChecker struct {
	m      *Model
	types  map[string]*openfgav1.TypeDefinition
	tuples []rel.Relationship
}

var errRefDepth = errors.New("depth")

func (c *refChecker) check(obj rel.ObjectRef, relation string, user rel.SubjectRef, path map[string]bool, depth int) (bool, error) {
	if depth == engine.OpenFGAMaxDepth {
		return false, errRefDepth
	}
	key := obj.Type + ":" + obj.ID + "#" + relation + "@" + UserString(user)
	if path[key] {
		return false, nil
	}
	if user.Object == obj && user.Relation == relation {
		return true, nil
	}
	next := make(map[string]bool, len(path)+1)
	for k := range path {
		next[k] = true
	}
	next[key] = true
	return c.rewrite(obj, relation, c.types[obj.Type].GetRelations()[relation], user, next, depth)
}

func (c *refChecker) rewrite(obj rel.ObjectRef, relation string, u *openfgav1.Userset, user rel.SubjectRef, path map[string]bool, depth int) (bool, error) {
	switch x := u.GetUserset().(type) {
	case *openfgav1.Userset_This:
		var branches []func() (bool, error)
		for _, t := range c.tuples {
			if t.Resource != obj || t.Relation != StoredRelation(relation) {
				continue
			}
			s := t.Subject
			switch {
			case s == user, s.Relation == "" && user.Relation == "" && s.Object.ID == rel.Wildcard && s.Object.Type == user.Object.Type:
				return true, nil
			case s.Relation != "":
				branches = append(branches, func() (bool, error) { return c.check(s.Object, s.Relation, user, path, depth+1) })
			}
		}
		return anyOf(branches)
	case *openfgav1.Userset_ComputedUserset:
		return c.check(obj, x.ComputedUserset.GetRelation(), user, path, depth+1)
	case *openfgav1.Userset_TupleToUserset:
		target := x.TupleToUserset.GetComputedUserset().GetRelation()
		var branches []func() (bool, error)
		for _, t := range c.tuples {
			if t.Resource != obj || t.Relation != StoredRelation(x.TupleToUserset.GetTupleset().GetRelation()) {
				continue
			}
			if _, ok := c.types[t.Subject.Object.Type].GetRelations()[target]; ok {
				o := t.Subject.Object
				branches = append(branches, func() (bool, error) { return c.check(o, target, user, path, depth+1) })
			}
		}
		return anyOf(branches)
	case *openfgav1.Userset_Union:
		var branches []func() (bool, error)
		for _, ch := range x.Union.GetChild() {
			branches = append(branches, func() (bool, error) { return c.rewrite(obj, relation, ch, user, path, depth) })
		}
		return anyOf(branches)
	case *openfgav1.Userset_Intersection:
		var firstErr error
		for _, ch := range x.Intersection.GetChild() {
			ok, err := c.rewrite(obj, relation, ch, user, path, depth)
			switch {
			case err != nil:
				firstErr = err
			case !ok:
				return false, nil
			}
		}
		return firstErr == nil, firstErr
	case *openfgav1.Userset_Difference:
		base, errBase := c.rewrite(obj, relation, x.Difference.GetBase(), user, path, depth)
		if errBase == nil && !base {
			return false, nil
		}
		sub, errSub := c.rewrite(obj, relation, x.Difference.GetSubtract(), user, path, depth)
		switch {
		case errSub == nil && sub:
			return false, nil
		case errBase != nil:
			return false, errBase
		case errSub != nil:
			return false, errSub
		}
		return true, nil
	}
	return false, nil
}

// anyOf is a union: true wins, then an error, then false.
func anyOf(branches []func() (bool, error)) (bool, error) {
	var firstErr error
	for _, b := range branches {
		ok, err := b()
		if err != nil {
			firstErr = err
			continue
		}
		if ok {
			return true, nil
		}
	}
	return false, firstErr
}

// randomModel writes a model of three types with random relations over unions,
// intersections, exclusions, computed relations, subject sets, wildcards and
// `x from parent`, cycles included; unions alone when unions.
func randomModel(rnd *rand.Rand, unions bool) string {
	var b strings.Builder
	b.WriteString("model\n  schema 1.1\ntype user\n")
	types := []string{"ta", "tb"}
	rels := []string{"r0", "r1", "r2"}
	for _, t := range types {
		fmt.Fprintf(&b, "type %s\n  relations\n    define parent: [ta, tb]\n", t)
		for i, r := range rels {
			direct := []string{"user"}
			if rnd.IntN(3) == 0 {
				direct = append(direct, "user:*")
			}
			for range rnd.IntN(3) {
				direct = append(direct, types[rnd.IntN(2)]+"#"+rels[rnd.IntN(len(rels))])
			}
			terms := []string{"[" + strings.Join(dedupeStrings(direct), ", ") + "]"}
			for range rnd.IntN(3) {
				switch rnd.IntN(2) {
				case 0:
					terms = append(terms, rels[rnd.IntN(len(rels))]+" from parent")
				default:
					if j := rnd.IntN(len(rels)); j != i {
						terms = append(terms, rels[j])
					}
				}
			}
			def := strings.Join(terms, " or ")
			if !unions && len(terms) > 1 && rnd.IntN(2) == 0 {
				op := []string{" and ", " but not "}[rnd.IntN(2)]
				def = terms[0] + op + "(" + strings.Join(terms[1:], " or ") + ")"
			}
			fmt.Fprintf(&b, "    define %s: %s\n", r, def)
		}
	}
	return b.String()
}

func dedupeStrings(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestCheckAgreesWithTheReference holds the engine under OpenFGA's semantics to the
// reference evaluator on random models (unions alone, and with intersections and
// exclusions) and random cyclic tuples, every check of every object, relation and
// user, singly and in bulk.
func TestCheckAgreesWithTheReference(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 32))
	ctx := context.Background()
	e := openFGAEngine()
	models, checks := 0, 0
	for iter := 0; models < 150 && iter < 1500; iter++ {
		src := randomModel(rnd, iter%2 == 0)
		m, probs := CompileDSL(src)
		if len(probs) > 0 {
			continue
		}
		models++
		ids := []string{"1", "2", "3"}
		var tuples []*openfgav1.TupleKey
		var stored []rel.Relationship
		for range 18 {
			typ := []string{"ta", "tb"}[rnd.IntN(2)]
			relation := []string{"parent", "r0", "r1", "r2"}[rnd.IntN(4)]
			users := []string{"user:anne", "user:bob", "user:*", "ta:1", "tb:2", "ta:2#r0", "tb:1#r1", "ta:3#r2", "tb:3#r0"}
			tk := &openfgav1.TupleKey{Object: typ + ":" + ids[rnd.IntN(3)], Relation: relation, User: users[rnd.IntN(len(users))]}
			if x, err := m.Relationship(tk); err == nil && !slices.ContainsFunc(stored, func(y rel.Relationship) bool { return y.Key() == x.Key() }) {
				tuples = append(tuples, tk)
				stored = append(stored, x)
			}
		}
		r := storeWith(t, m, tuples...)
		ref := &refChecker{m: m, types: m.types(), tuples: stored}
		for _, user := range []string{"user:anne", "user:bob", "ta:1#r0", "tb:2#r1"} {
			var reqs []engine.CheckRequest
			var want []string
			for _, typ := range []string{"ta", "tb"} {
				for _, relation := range []string{"r0", "r1", "r2"} {
					for _, id := range ids {
						req, err := m.CheckRequest(typ+":"+id, relation, user, nil)
						if err != nil {
							t.Fatal(err)
						}
						ok, err := ref.check(req.Resource, relation, req.Subject, nil, 0)
						reqs = append(reqs, req)
						want = append(want, outcomeString(ok, err))
					}
				}
			}
			for i, res := range e.CheckBulk(ctx, m.Schema, r, reqs) {
				checks++
				got := outcomeString(res.Result.Membership == engine.HasPermission, res.Err)
				alone, err := e.Check(ctx, m.Schema, r, reqs[i])
				gotAlone := outcomeString(alone.Membership == engine.HasPermission, err)
				if got != want[i] || gotAlone != want[i] {
					t.Fatalf("%s#%s@%s: bulk %s, alone %s, reference %s\nmodel:\n%s\ntuples: %v",
						reqs[i].Resource, reqs[i].Permission, user, got, gotAlone, want[i], src, tuples)
				}
			}
		}
	}
	if models < 20 {
		t.Fatalf("only %d random models compiled", models)
	}
	t.Logf("%d checks on %d random models agree with the reference", checks, models)
}

func outcomeString(ok bool, err error) string {
	switch {
	case errors.Is(err, errRefDepth), errors.Is(err, engine.ErrMaxDepth):
		return "depth error"
	case err != nil:
		return "error: " + err.Error()
	case ok:
		return "allowed"
	}
	return "denied"
}
