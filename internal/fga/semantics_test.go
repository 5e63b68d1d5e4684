package fga

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// storeWith writes tuples under m to a new memory store and returns the reader
// evaluation under m reads.
func storeWith(t *testing.T, m *Model, tuples ...*openfgav1.TupleKey) store.Reader {
	t.Helper()
	ctx := context.Background()
	s := memory.New(memory.Options{})
	t.Cleanup(func() { s.Close() })
	var updates []store.Update
	for _, tk := range tuples {
		x, err := m.Relationship(tk)
		if err != nil {
			t.Fatal(err)
		}
		updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
	}
	rev, err := s.Write(ctx, nil, updates, nil)
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Reader(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Reader(base, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func openFGAEngine() *engine.Engine {
	return engine.New(engine.Config{Semantics: engine.OpenFGA, MaxDepth: engine.OpenFGAMaxDepth})
}

// checkAnswer asks the OpenFGA engine whether user has relation on object under m,
// reading r, with request context reqCtx: "true", "false", or "error" with the error.
func checkAnswer(t *testing.T, m *Model, r store.Reader, object, relation, user string, reqCtx map[string]any) (string, error) {
	t.Helper()
	req, err := m.CheckRequest(object, relation, user, mustStruct(t, reqCtx))
	if err != nil {
		t.Fatal(err)
	}
	res, err := openFGAEngine().Check(context.Background(), m.Schema, r, req)
	if err == nil {
		var allowed bool
		if allowed, err = Allowed(res); err == nil {
			return fmt.Sprint(allowed), nil
		}
	}
	return "error", err
}

// listAnswer is what ListObjects answers for typ#relation@user with the request
// context reqCtx: the object ids, or "error " and the OpenFGA error code.
func listAnswer(t *testing.T, m *Model, r store.Reader, typ, relation, user string, reqCtx map[string]any) (string, error) {
	t.Helper()
	req, err := m.LookupResourcesRequest(typ, relation, user, mustStruct(t, reqCtx))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ListObjects(context.Background(), openFGAEngine(), m, r, req)
	if err != nil {
		return fmt.Sprintf("error %d", ErrorCode(err)), err
	}
	return fmt.Sprint(ids), nil
}

// condition is a tuple's condition name with its context.
func condition(t *testing.T, name string, ctx map[string]any) *openfgav1.RelationshipCondition {
	return &openfgav1.RelationshipCondition{Name: name, Context: mustStruct(t, ctx)}
}

// smallAndFlag declares the conditions the models of these tests use.
const smallAndFlag = "condition small(x: int) {\n  x < 10\n}\ncondition flag(on: bool) {\n  on\n}\n"

// OpenFGA fails a check when its 25th dispatch (computed userset, tupleset object,
// subject set) would be resolved: a chain of usersets a_n → … → a1 takes n-2 of
// them, since a2 reads a1's tuples from the subject's side (OpenFGA's weight-two
// strategy) rather than dispatching, and the step from a relation to its own tuples
// takes none. (OpenFGA v1.22.1 allows a26 and fails a27.)
func TestDepthCountsAsOpenFGACounts(t *testing.T) {
	var src strings.Builder
	src.WriteString("model\n  schema 1.1\ntype user\ntype resource\n  relations\n    define a1: [user]\n")
	for i := 2; i <= 27; i++ {
		fmt.Fprintf(&src, "    define a%d: [resource#a%d]\n", i, i-1)
	}
	m := mustModel(t, src.String())
	tuples := []*openfgav1.TupleKey{{Object: "resource:1", Relation: "a1", User: "user:maria"}}
	for i := 2; i <= 27; i++ {
		tuples = append(tuples, &openfgav1.TupleKey{Object: "resource:1", Relation: fmt.Sprintf("a%d", i), User: fmt.Sprintf("resource:1#a%d", i-1)})
	}
	r := storeWith(t, m, tuples...)
	e := openFGAEngine()
	check := func(relation string) (engine.Result, error) {
		req, err := m.CheckRequest("resource:1", relation, "user:maria", nil)
		if err != nil {
			t.Fatal(err)
		}
		return e.Check(context.Background(), m.Schema, r, req)
	}
	if res, err := check("a26"); err != nil || res.Membership != engine.HasPermission {
		t.Errorf("a26 (24 dispatches) = %v, %v; want allowed", res, err)
	}
	_, err := check("a27")
	if !errors.Is(err, engine.ErrMaxDepth) || ErrorCode(err) != openfgav1.ErrorCode_authorization_model_resolution_too_complex {
		t.Errorf("a27 (25 dispatches) error = %v; want resolution too complex", err)
	}
}

// Checks that differ only in their object are evaluated together; a cycle one of
// them meets through another of the batch is not a cycle on its own path.
func TestCyclesAreOnTheirOwnPathInABatch(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype folder\n  relations\n    define parent: [folder]\n    define viewer: [user] or viewer from parent\n")
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "folder:f1", Relation: "parent", User: "folder:f2"},
		&openfgav1.TupleKey{Object: "folder:f2", Relation: "parent", User: "folder:f1"},
		&openfgav1.TupleKey{Object: "folder:f2", Relation: "viewer", User: "user:anne"},
	)
	e := openFGAEngine()
	var reqs []engine.CheckRequest
	for _, f := range []string{"folder:f1", "folder:f2", "folder:f3"} {
		req, err := m.CheckRequest(f, "viewer", "user:anne", nil)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	want := []engine.Membership{engine.HasPermission, engine.HasPermission, engine.NoPermission}
	for i, res := range e.CheckBulk(context.Background(), m.Schema, r, reqs) {
		if res.Err != nil || res.Result.Membership != want[i] {
			t.Errorf("%s: %v, %v; want %v", reqs[i].Resource.ID, res.Result, res.Err, want[i])
		}
	}
	// Alone, a cycle with nothing else to grant is no, not a depth error.
	res, err := e.Check(context.Background(), m.Schema, r, reqs[0])
	if err != nil || res.Membership != engine.HasPermission {
		t.Errorf("alone: %v, %v", res, err)
	}
	r2 := storeWith(t, m,
		&openfgav1.TupleKey{Object: "folder:f1", Relation: "parent", User: "folder:f2"},
		&openfgav1.TupleKey{Object: "folder:f2", Relation: "parent", User: "folder:f1"},
	)
	if res, err := e.Check(context.Background(), m.Schema, r2, reqs[0]); err != nil || res.Membership != engine.NoPermission {
		t.Errorf("a cycle alone: %v, %v; want no permission", res, err)
	}
	spice := engine.New(engine.Config{})
	if _, err := spice.Check(context.Background(), m.Schema, r2, reqs[0]); !errors.Is(err, engine.ErrMaxDepth) {
		t.Errorf("SpiceDB's semantics: %v; want the depth error", err)
	}
}

func TestWildcardSubjectMatchesWildcardTuplesOnly(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define viewer: [user, user:*]\n")
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "doc:public", Relation: "viewer", User: "user:*"},
		&openfgav1.TupleKey{Object: "doc:private", Relation: "viewer", User: "user:anne"},
	)
	e := openFGAEngine()
	for _, c := range []struct {
		object string
		want   engine.Membership
	}{{"doc:public", engine.HasPermission}, {"doc:private", engine.NoPermission}} {
		req, err := m.CheckRequest(c.object, "viewer", "user:*", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := e.Check(context.Background(), m.Schema, r, req); err != nil || res.Membership != c.want {
			t.Errorf("%s: %v, %v; want %v", c.object, res, err, c.want)
		}
		if _, err := engine.New(engine.Config{}).Check(context.Background(), m.Schema, r, req); !errors.Is(err, engine.ErrWildcardSubject) {
			t.Errorf("SpiceDB's semantics accept a wildcard subject: %v", err)
		}
	}
	req, err := m.LookupResourcesRequest("doc", "viewer", "user:*", nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ListObjects(context.Background(), e, m, r, req)
	if err != nil || len(ids) != 1 || ids[0] != "public" {
		t.Errorf("ListObjects for user:* = %v, %v; want [public]", ids, err)
	}
}

// A tuple a later model no longer admits is ignored, not refused.
func TestTuplesALaterModelDoesNotAdmitAreIgnored(t *testing.T) {
	old := mustModel(t, "model\n  schema 1.1\ntype user\ntype team\ntype doc\n  relations\n    define viewer: [user, team]\n")
	newer := mustModel(t, "model\n  schema 1.1\ntype user\ntype team\ntype doc\n  relations\n    define viewer: [user]\n")
	x, err := old.Relationship(&openfgav1.TupleKey{Object: "doc:1", Relation: "viewer", User: "team:t"})
	if err != nil {
		t.Fatal(err)
	}
	if newer.Admits(x) {
		t.Fatal("the newer model admits a team viewer")
	}
	r := storeWith(t, old, &openfgav1.TupleKey{Object: "doc:1", Relation: "viewer", User: "team:t"})
	base := r.(*admitted).Reader
	rNew, err := newer.Reader(base, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var seen []rel.Relationship
	for item, err := range rNew.Query(context.Background(), store.Filter{ResourceType: "doc"}, store.QueryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, item.Relationship)
	}
	if len(seen) != 0 {
		t.Errorf("the newer model's reader shows %v", seen)
	}
	req := engine.CheckRequest{Resource: rel.ObjectRef{Type: "doc", ID: "1"}, Permission: "viewer", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "team", ID: "t"}}}
	if res, err := openFGAEngine().Check(context.Background(), newer.Schema, rNew, req); err != nil || res.Membership != engine.NoPermission {
		t.Errorf("check under the newer model: %v, %v", res, err)
	}
}

// ListUsers on cyclic data (groups members of each other, reached through a
// tupleset) agrees with a reference check of every user: its walk ends each path at
// a subject set met again on it.
func TestListUsersOnCyclicData(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype group\n  relations\n    define member: [user, group#member]\ntype doc\n  relations\n    define owner: [group]\n    define viewer: member from owner\n")
	tuples := []*openfgav1.TupleKey{
		{Object: "group:a", Relation: "member", User: "group:b#member"},
		{Object: "group:b", Relation: "member", User: "group:a#member"},
		{Object: "group:b", Relation: "member", User: "user:anne"},
		{Object: "group:c", Relation: "member", User: "user:bob"},
		{Object: "doc:1", Relation: "owner", User: "group:a"},
	}
	r := storeWith(t, m, tuples...)
	var stored []rel.Relationship
	for _, tk := range tuples {
		x, err := m.Relationship(tk)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, x)
	}
	ref := &refChecker{m: m, types: m.types(), tuples: stored}
	doc := rel.ObjectRef{Type: "doc", ID: "1"}
	for _, f := range []*openfgav1.UserTypeFilter{{Type: "user"}, {Type: "group", Relation: "member"}} {
		users, err := ListUsers(context.Background(), m, r, doc, "viewer", []*openfgav1.UserTypeFilter{f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, u := range users {
			got = append(got, userString(u))
		}
		for _, u := range []string{"user:anne", "user:bob", "group:a#member", "group:b#member", "group:c#member"} {
			s, _ := ParseUser(u)
			if s.Object.Type != f.GetType() || s.Relation != f.GetRelation() {
				continue
			}
			if ok, err := ref.check(doc, "viewer", s, nil, 0); err == nil && ok {
				want = append(want, u)
			}
		}
		if msg := sameSet(got, want); msg != "" || len(want) == 0 {
			t.Errorf("ListUsers %v: %s (want %v)", f, msg, want)
		}
	}
}

// listUsersOf lists the users of filter ("type" or "type#relation") with relation on
// object, spelled as the suite spells them, or the error's OpenFGA code.
func listUsersOf(t *testing.T, m *Model, r store.Reader, object, relation, filter string, reqCtx map[string]any) ([]string, openfgav1.ErrorCode) {
	t.Helper()
	obj, err := ParseObject(object)
	if err != nil {
		t.Fatal(err)
	}
	typ, frel, _ := strings.Cut(filter, "#")
	users, err := ListUsers(context.Background(), m, r, obj, relation, []*openfgav1.UserTypeFilter{{Type: typ, Relation: frel}}, reqCtx)
	if err != nil {
		return nil, ErrorCode(err)
	}
	out := []string{}
	for _, u := range users {
		out = append(out, userString(u))
	}
	return out, 0
}

// OpenFGA's ListUsers evaluates the condition of every tuple it reads, and fails when
// one lacks a parameter, whether or not that tuple leads to a user of the filter;
// where its walk never reads the tuple (no user of the filter's type can be reached)
// it answers.
func TestListUsersFailsOnAnyConditionItReads(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype t1\n  relations\n    define r0: [user, user with flag]\ntype t0\n  relations\n    define r0: [user, t1#r0, t1]\ncondition flag(on: bool) {\n  on\n}\n")
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "t1:1", Relation: "r0", User: "user:1", Condition: &openfgav1.RelationshipCondition{Name: "flag"}},
		&openfgav1.TupleKey{Object: "t0:2", Relation: "r0", User: "t1:1#r0"},
		&openfgav1.TupleKey{Object: "t0:2", Relation: "r0", User: "user:2"},
	)
	if got, code := listUsersOf(t, m, r, "t0:2", "r0", "t0#r0", nil); code != openfgav1.ErrorCode_validation_error {
		t.Errorf("ListUsers t0:2#r0 of t0#r0 without `on`: %v, code %v; want error %v", got, code, openfgav1.ErrorCode_validation_error)
	}
	if got, code := listUsersOf(t, m, r, "t0:2", "r0", "user", map[string]any{"on": true}); code != 0 || !slices.Equal(got, []string{"user:1", "user:2"}) {
		t.Errorf("ListUsers t0:2#r0 of user with `on`: %v, code %v; want [user:1 user:2]", got, code)
	}
	if got, code := listUsersOf(t, m, r, "t1:1", "r0", "t0", nil); code != 0 || len(got) != 0 {
		t.Errorf("ListUsers t1:1#r0 of t0 (unreachable): %v, code %v; want [] without reading the tuples", got, code)
	}
}

// OpenFGA's ListUsers of a subject set filter names, besides the subject sets, each
// object of the filter's type that a tuple it reads assigns directly.
func TestListUsersOfASubjectSetNamesDirectObjectsOfItsType(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype t2\n  relations\n    define r1: [t2]\ntype t1\n  relations\n    define r0: [t2#r1]\n")
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "t2:0", Relation: "r1", User: "t2:2"},
		&openfgav1.TupleKey{Object: "t1:0", Relation: "r0", User: "t2:0#r1"},
	)
	if got, code := listUsersOf(t, m, r, "t1:0", "r0", "t2#r1", nil); code != 0 || !slices.Equal(got, []string{"t2:0#r1", "t2:2"}) {
		t.Errorf("ListUsers t1:0#r0 of t2#r1: %v, code %v; want [t2:0#r1 t2:2] as OpenFGA v1.22.1 answers", got, code)
	}
}

// OpenFGA reads a contextual tuple beside the stored tuple of the same key, each with
// its own condition, except in a Check of that very user, where the contextual tuple
// takes the stored one's place.
func TestContextualTupleOfAStoredKey(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define viewer: [user, user with small, user:* with small]\ncondition small(x: int) {\n  x < 10\n}\n")
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "doc:1", Relation: "viewer", User: "user:*", Condition: condition(t, "small", map[string]any{"x": 7})},
		&openfgav1.TupleKey{Object: "doc:2", Relation: "viewer", User: "user:2"},
	)
	for _, c := range []struct {
		contextual *openfgav1.TupleKey
		object     string
		user       string
		want       bool
	}{
		// The stored wildcard tuple (x 7) grants; the contextual one, lacking x, is read
		// beside it and cannot take that away.
		{&openfgav1.TupleKey{Object: "doc:1", Relation: "viewer", User: "user:*", Condition: condition(t, "small", nil)}, "doc:1", "user:0", true},
		// The contextual tuple of user:2 (x 18) replaces the stored unconditional one.
		{&openfgav1.TupleKey{Object: "doc:2", Relation: "viewer", User: "user:2", Condition: condition(t, "small", map[string]any{"x": 18})}, "doc:2", "user:2", false},
	} {
		rc, err := m.Reader(r, []*openfgav1.TupleKey{c.contextual}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req, err := m.CheckRequest(c.object, "viewer", c.user, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := openFGAEngine().Check(context.Background(), m.Schema, rc, req)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Allowed(res); err != nil || got != c.want {
			t.Errorf("Check %s#viewer@%s with contextual %v: %v, %v; want %v", c.object, c.user, c.contextual, got, err, c.want)
		}
	}
}

// OpenFGA reads a subject set `[t1#r0]` or an arrow `r0 from parent` whose relation
// holds the user in one step from the user's side (its weight-two strategy): every
// t1#r0 tuple of the user, whatever its object. A condition lacking its parameter on
// one of them fails the check, even on an object the check does not need, unless
// another of them holds (then the check is denied, or allowed when its object is one
// of the checked object's). A model OpenFGA builds no weighted graph for (here an
// intersection of operands with no type in common) is resolved by following tuples,
// where only the tuples of the objects needed count. Each answer is OpenFGA v1.22.1's.
func TestSubjectSideReadsDecideMissingParameters(t *testing.T) {
	// t1#r0's subject set t2#member never reaches a user: OpenFGA still reads t1#r0
	// in one step from the user's side.
	const types = "type t0\n  relations\n    define r1: [t1#r0]\n    define r2: r0 from parent\n    define parent: [t1]\n" +
		"type t2\n  relations\n    define member: [t2]\n" +
		"type t1\n  relations\n    define r0: [user with flag, t2#member]\n"
	const flag = "condition flag(on: bool) {\n  on\n}\n"
	weighted := mustModel(t, "model\n  schema 1.1\ntype user\n"+types+flag)
	unweighted := mustModel(t, "model\n  schema 1.1\ntype user\n"+types+
		"    define r1: [t0]\n    define r2: r0 and r1\n"+flag)
	failing := []*openfgav1.TupleKey{
		{Object: "t1:2", Relation: "r0", User: "user:2", Condition: condition(t, "flag", nil)},
		{Object: "t0:1", Relation: "r1", User: "t1:1#r0"},
		{Object: "t0:1", Relation: "parent", User: "t1:1"},
	}
	holding := append(slices.Clone(failing), &openfgav1.TupleKey{Object: "t1:0", Relation: "r0", User: "user:2", Condition: condition(t, "flag", map[string]any{"on": true})})
	granting := append(slices.Clone(failing), &openfgav1.TupleKey{Object: "t1:1", Relation: "r0", User: "user:2", Condition: condition(t, "flag", map[string]any{"on": true})})
	for _, c := range []struct {
		name   string
		m      *Model
		tuples []*openfgav1.TupleKey
		object string
		want   string
	}{
		{"failing tuple of another object", weighted, failing, "t0:1", "error"},
		{"no subject set to intersect", weighted, failing, "t0:0", "false"},
		{"another tuple of the user holds", weighted, holding, "t0:1", "false"},
		{"a tuple of the object's subject set holds", weighted, granting, "t0:1", "true"},
		{"no weighted graph: tuples followed", unweighted, failing, "t0:1", "false"},
	} {
		r := storeWith(t, c.m, c.tuples...)
		for _, relation := range []string{"r1", "r2"} {
			if got, err := checkAnswer(t, c.m, r, c.object, relation, "user:2", nil); got != c.want {
				t.Errorf("%s: Check %s#%s@user:2 = %s (%v); want %s", c.name, c.object, relation, got, err, c.want)
			}
		}
	}
}

// OpenFGA reads a union of relations of tuples from the user's side one operand at a
// time and fails when one operand's tuples fail with none holding, even where
// another operand grants; and resolves a relation's subject set of itself (t1#r0 on
// t1#r0) by walking its subject sets from the object to the objects whose own
// tuples hold the user, failing when none holds and a condition failed. Each answer
// is OpenFGA v1.22.1's.
func TestUnionAndRecursiveReadsDecideMissingParameters(t *testing.T) {
	const flag = "condition flag(on: bool) {\n  on\n}\n"
	union := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r1: [t1#r2]\n"+
		"type t1\n  relations\n    define r0: [user with flag]\n    define r1: [user]\n    define r2: r0 or r1\n"+flag)
	recursive := mustModel(t, "model\n  schema 1.1\ntype user\ntype t1\n  relations\n    define r0: [user with flag, t1#r0]\n"+flag)
	// t1#r0's arrow reaches no user: OpenFGA reads nothing for it.
	withArrow := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r1: [t0]\n"+
		"type t1\n  relations\n    define r0: [user:* with flag, t0] or r1 from r1\n    define r1: [t0]\n"+
		"type t2\n  relations\n    define r0: [user, t1#r0]\n"+flag)
	failing := &openfgav1.TupleKey{Object: "t1:0", Relation: "r0", User: "user:1", Condition: condition(t, "flag", nil)}
	unionTuples := []*openfgav1.TupleKey{
		failing,
		{Object: "t1:1", Relation: "r1", User: "user:1"},
		{Object: "t0:1", Relation: "r1", User: "t1:1#r2"},
	}
	chain := []*openfgav1.TupleKey{failing, {Object: "t1:1", Relation: "r0", User: "t1:2#r0"}}
	// OpenFGA walks t0#r0's subject sets of t1#r1 with them (t1#r1 reaches no user)
	// and reads on each t1 object found the tuples of t1#r0, by the walked relation's
	// name: t0:2#r0@t1:2#r1, t1:2#r0@t0:1#r0 and t0:1#r0@user:1 grant t0:2#r0.
	mixed := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r0: [user with flag, t0#r0, t1#r1]\n"+
		"type t1\n  relations\n    define r0: [user with flag, t0#r0]\n    define r1: [t0]\n"+flag)
	mixedTuples := []*openfgav1.TupleKey{
		{Object: "t0:1", Relation: "r0", User: "user:1", Condition: condition(t, "flag", nil)},
		{Object: "t0:2", Relation: "r0", User: "t1:2#r1"},
		{Object: "t1:2", Relation: "r0", User: "t0:1#r0"},
	}
	arrowTuples := []*openfgav1.TupleKey{
		{Object: "t1:0", Relation: "r0", User: "user:*", Condition: condition(t, "flag", nil)},
		{Object: "t2:0", Relation: "r0", User: "t1:1#r0"},
	}
	holding := append(slices.Clone(chain),
		&openfgav1.TupleKey{Object: "t1:3", Relation: "r0", User: "user:1", Condition: condition(t, "flag", map[string]any{"on": true})},
		&openfgav1.TupleKey{Object: "t1:2", Relation: "r0", User: "t1:3#r0"},
		&openfgav1.TupleKey{Object: "t1:5", Relation: "r0", User: "t1:4#r0"},
	)
	for _, c := range []struct {
		name     string
		m        *Model
		tuples   []*openfgav1.TupleKey
		object   string
		relation string
		ctx      map[string]any
		want     string
	}{
		{"union: an operand fails, another grants", union, unionTuples, "t0:1", "r1", nil, "error"},
		{"union: with the parameter", union, unionTuples, "t0:1", "r1", map[string]any{"on": true}, "true"},
		{"union with an arrow: the only read fails", withArrow, arrowTuples, "t2:0", "r0", nil, "error"},
		{"union with an arrow: with the parameter", withArrow, arrowTuples, "t2:0", "r0", map[string]any{"on": true}, "false"},
		{"recursive: none holds, one fails", recursive, chain, "t1:1", "r0", nil, "error"},
		{"recursive: no subject set to walk", recursive, chain, "t1:2", "r0", nil, "false"},
		{"recursive: the walk reaches one that holds", recursive, holding, "t1:1", "r0", nil, "true"},
		{"recursive: the walk reaches none", recursive, holding, "t1:5", "r0", nil, "false"},
		{"recursive: the walk reads other types' tuples by the relation's name", mixed, mixedTuples, "t0:2", "r0", map[string]any{"on": true}, "true"},
		{"recursive: so it fails where they lead to the failing tuple", mixed, mixedTuples, "t0:2", "r0", nil, "error"},
	} {
		r := storeWith(t, c.m, c.tuples...)
		if got, err := checkAnswer(t, c.m, r, c.object, c.relation, "user:1", c.ctx); got != c.want {
			t.Errorf("%s: Check %s#%s@user:1 = %s (%v); want %s", c.name, c.object, c.relation, got, err, c.want)
		}
	}
}

// OpenFGA's weight-two strategy reads an `and` or `but not` of relations of tuples
// from the user's side as merged streams, operand by operand in order: a read whose
// tuples all fail a condition fails the check once it is reached, and a read that
// found nothing ends an `and` (or leaves a `but not` its base) before the operands
// after it are looked at. Here t1:0's tuples lack x; only t1:1 is the checked
// object's parent. Each answer is OpenFGA v1.22.1's (the differential test's seed
// 2238).
func TestWeightTwoReadsOfAndAndButNotStopAsOpenFGAs(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r1: [t1]\n    define r2: r1 from r1\n    define r3: [t1]\n    define r4: r2 from r3\n"+
		"type t1\n  relations\n    define r0: [user with flag, user:* with small, user with small]\n    define r1: [user:* with small] and r0\n"+
		"    define r2: r0 and r5\n    define r3: [user:* with small] but not r0\n    define r4: r0 but not r5\n    define r5: [user:* with small]\n"+
		smallAndFlag)
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "t1:0", Relation: "r1", User: "user:*", Condition: condition(t, "small", nil)},
		&openfgav1.TupleKey{Object: "t1:0", Relation: "r5", User: "user:*", Condition: condition(t, "small", nil)},
		&openfgav1.TupleKey{Object: "t1:0", Relation: "r3", User: "user:*", Condition: condition(t, "small", nil)},
		&openfgav1.TupleKey{Object: "t1:1", Relation: "r0", User: "user:1", Condition: condition(t, "flag", map[string]any{"on": true})},
		&openfgav1.TupleKey{Object: "t0:0", Relation: "r1", User: "t1:1"},
		&openfgav1.TupleKey{Object: "t0:0", Relation: "r3", User: "t1:1"},
	)
	for _, c := range []struct {
		relation, user string
		reqCtx         map[string]any
		want           string
	}{
		{"r2", "user:0", map[string]any{"on": true}, "error"}, // [user:* with small] fails before r0 is found empty
		{"r2", "user:0", map[string]any{"x": 3}, "false"},
		{"r2", "user:1", nil, "error"},
		{"r4", "user:0", nil, "false"}, // r0 found nothing first
		{"r4", "user:1", nil, "error"},
	} {
		if got, err := checkAnswer(t, m, r, "t0:0", c.relation, c.user, c.reqCtx); got != c.want {
			t.Errorf("Check t0:0#%s@%s %v = %s (%v); want %s", c.relation, c.user, c.reqCtx, got, err, c.want)
		}
	}
}

// OpenFGA reads a user's tuples from the subject's side (its weight-two strategy,
// here for the subject set t2#r1) in object order, one tuple per object, a contextual
// tuple before the stored ones: the stored t2:1#r0@user:* lacking x is not evaluated
// beside a contextual tuple of t2:1, whatever its user. Each answer is OpenFGA
// v1.22.1's (the differential test's seed 1186).
func TestSubjectSideReadsTakeAnObjectsContextualTupleAlone(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r0: [user, t2#r1]\n"+
		"type t2\n  relations\n    define r0: [user:* with small, user with flag, user]\n    define r1: r0\n"+
		smallAndFlag)
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "t0:0", Relation: "r0", User: "t2:1#r1"},
		&openfgav1.TupleKey{Object: "t2:1", Relation: "r0", User: "user:*", Condition: condition(t, "small", nil)},
	)
	for _, c := range []struct {
		user       string
		contextual *openfgav1.TupleKey
		want       string
	}{
		{"user:*", nil, "error"},
		{"user:*", &openfgav1.TupleKey{Object: "t2:1", Relation: "r0", User: "user:*", Condition: condition(t, "small", map[string]any{"x": 5})}, "true"},
		{"user:*", &openfgav1.TupleKey{Object: "t2:1", Relation: "r0", User: "user:*", Condition: condition(t, "small", map[string]any{"x": 15})}, "false"},
		{"user:*", &openfgav1.TupleKey{Object: "t2:1", Relation: "r0", User: "user:*", Condition: condition(t, "small", nil)}, "error"},
		{"user:3", &openfgav1.TupleKey{Object: "t2:1", Relation: "r0", User: "user:*", Condition: condition(t, "small", map[string]any{"x": 15})}, "false"},
		{"user:3", &openfgav1.TupleKey{Object: "t2:2", Relation: "r0", User: "user:*", Condition: condition(t, "small", map[string]any{"x": 5})}, "false"},
		{"user:3", &openfgav1.TupleKey{Object: "t2:1", Relation: "r0", User: "user:3"}, "true"},
	} {
		var contextual []*openfgav1.TupleKey
		if c.contextual != nil {
			contextual = append(contextual, c.contextual)
		}
		rc, err := m.Reader(r, contextual, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := checkAnswer(t, m, rc, "t0:0", "r0", c.user, nil); got != c.want {
			t.Errorf("Check t0:0#r0@%s with contextual %v = %s (%v); want %s", c.user, c.contextual, got, err, c.want)
		}
	}
}

// OpenFGA answers no at once for a relation its graph of the model has no path to
// from the user, before it evaluates anything: here t0#r2 reaches no user, so the
// subtract of t0#r0 is no, where evaluating it would meet the cycle t0:1#r2 → t0:1#r3
// → t0:1#r2 (a cycle in a subtract makes a `but not` no). Each answer is OpenFGA
// v1.22.1's (the differential test's seed 5122).
func TestRelationsNoPathReachesAnswerNo(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r0: ([user:*, t0]) but not r2 from r1\n"+
		"    define r1: [t0]\n    define r2: r1 from r1 or r1 or r3 from r1\n    define r3: (r2 from r1) but not r2\n")
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "t0:2", Relation: "r0", User: "user:*"},
		&openfgav1.TupleKey{Object: "t0:2", Relation: "r1", User: "t0:1"},
		&openfgav1.TupleKey{Object: "t0:1", Relation: "r1", User: "t0:1"},
	)
	for _, c := range []struct {
		object, relation, user string
		want                   bool
	}{
		{"t0:2", "r0", "user:2", true},
		{"t0:2", "r0", "user:*", true},
		{"t0:2", "r0", "t0:1", false},
		{"t0:1", "r2", "t0:1", true},
		{"t0:1", "r3", "t0:1", false},
	} {
		req, err := m.CheckRequest(c.object, c.relation, c.user, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := openFGAEngine().Check(context.Background(), m.Schema, r, req)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Allowed(res); err != nil || got != c.want {
			t.Errorf("Check %s#%s@%s = %v, %v; want %v", c.object, c.relation, c.user, got, err, c.want)
		}
	}
	if got, err := listAnswer(t, m, r, "t0", "r0", "user:0", nil); err != nil || got != "[2]" {
		t.Errorf("ListObjects t0#r0@user:0 = %v, %v; want [2]", got, err)
	}
}

// OpenFGA reads `r3 from r1` whose r3 is a union of relations of tuples from the
// user's side when the arrow has one parent type: the union's reads are merged, and
// t0:2's tuple lacking x fails nothing while another tuple of the read (t0:0's)
// holds. Each answer is OpenFGA v1.22.1's (the differential test's seed 3005).
func TestWeightTwoArrowToAUnionOfOneParentType(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r0: [user:* with small, user with flag, t1]\n"+
		"    define r1: r0\n    define r2: r0\n    define r3: r0 or r1\n"+
		"type t1\n  relations\n    define r0: ([user with flag, user] or r3 from r1) but not r2 from r1\n    define r1: [t0]\n    define r4: r3 from r1\n"+
		smallAndFlag)
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "t1:1", Relation: "r1", User: "t0:2"},
		&openfgav1.TupleKey{Object: "t0:0", Relation: "r0", User: "user:2", Condition: condition(t, "flag", map[string]any{"on": true})},
		&openfgav1.TupleKey{Object: "t0:2", Relation: "r0", User: "user:*", Condition: condition(t, "small", nil)},
	)
	for _, c := range []struct {
		relation, user string
		reqCtx         map[string]any
		want           string
	}{
		{"r0", "user:2", nil, "false"},
		{"r4", "user:2", nil, "false"},
		{"r4", "user:3", nil, "error"},
		{"r4", "user:2", map[string]any{"x": 3}, "true"},
	} {
		if got, err := checkAnswer(t, m, r, "t1:1", c.relation, c.user, c.reqCtx); got != c.want {
			t.Errorf("Check t1:1#%s@%s %v = %s (%v); want %s", c.relation, c.user, c.reqCtx, got, err, c.want)
		}
	}
}

// OpenFGA resolves a relation's arrow to itself (`define r0: [user with small] or r0
// from r1`, r1 of the same type) by its recursive strategy: it reads the relation's
// tuples of the user on every object and walks the object's parents to one of them;
// a condition lacking a parameter on those tuples fails the check when none holds,
// even on an object the walk never reaches, if the object has a parent. Each answer
// is OpenFGA v1.22.1's (the differential test's seed 5131).
func TestRecursiveArrowReadsAsOpenFGAs(t *testing.T) {
	m := mustModel(t, "model\n  schema 1.1\ntype user\ntype t1\n  relations\n    define r0: [user with small] or r0 from r1\n    define r1: [t1]\n"+
		"condition small(x: int) {\n  x < 10\n}\n")
	r := storeWith(t, m,
		&openfgav1.TupleKey{Object: "t1:0", Relation: "r1", User: "t1:1"},
		&openfgav1.TupleKey{Object: "t1:1", Relation: "r1", User: "t1:3"},
		&openfgav1.TupleKey{Object: "t1:2", Relation: "r0", User: "user:2", Condition: condition(t, "small", nil)},
		&openfgav1.TupleKey{Object: "t1:3", Relation: "r0", User: "user:3", Condition: condition(t, "small", map[string]any{"x": 1})},
	)
	for _, c := range []struct {
		object, user string
		want         string
	}{
		{"t1:0", "user:2", "error"}, // t1:2's tuple lacks x, none holds
		{"t1:2", "user:2", "error"}, // its own tuple lacks x
		{"t1:1", "user:3", "true"},  // parent t1:3 holds
		{"t1:0", "user:3", "true"},  // through t1:1 to t1:3
		{"t1:3", "user:2", "false"}, // no parent: nothing is read from the user's side
	} {
		if got, err := checkAnswer(t, m, r, c.object, "r0", c.user, nil); got != c.want {
			t.Errorf("Check %s#r0@%s = %s (%v); want %s", c.object, c.user, got, err, c.want)
		}
	}
}
