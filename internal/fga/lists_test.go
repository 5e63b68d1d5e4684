package fga

import (
	"testing"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
)

// OpenFGA v1.22.1 answers a ListObjects of a user object by its pipeline, which walks
// its weighted graph up from the user and fails on any tuple it reads whose condition
// lacks a parameter, even one that leads to no object its Check would allow; a
// condition that does not hold drops its tuple; `and` and `but not` combine what
// their operands found; a contextual tuple is read beside the stored tuple of the
// same key. Each answer is OpenFGA v1.22.1's (the differential test's seeds 14, 1076,
// 1111 and their neighbours).
func TestListObjectsReadsAsOpenFGAsPipeline(t *testing.T) {
	// Seed 14: t2:1#r1's subject set t0:1#r0 holds no user, so OpenFGA's Check of
	// t2:1 denies; its pipeline reads t0#r0's tuples of user:2 first and fails on t0:0's.
	seed14 := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r0: [user with small, t1, user with flag]\n    define r1: [t2] or r0\n"+
		"type t1\n  relations\n    define r0: [user:* with small, t0#r1]\n"+
		"type t2\n  relations\n    define r0: [user:* with small, t2#r0]\n    define r1: [t0, t0#r0]\n"+smallAndFlag)
	seed14Tuples := []*openfgav1.TupleKey{
		{Object: "t2:1", Relation: "r1", User: "t0:1#r0"},
		{Object: "t0:0", Relation: "r0", User: "user:2", Condition: condition(t, "small", nil)},
	}
	// Seed 1111: the stored wildcard tuple holds (x 9), the contextual one of the same
	// key lacks x and is read too.
	seed1111 := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r0: [user:* with small, t0#r0]\n"+smallAndFlag)
	seed1111Tuples := []*openfgav1.TupleKey{
		{Object: "t0:1", Relation: "r0", User: "t0:0#r0"},
		{Object: "t0:0", Relation: "r0", User: "user:*", Condition: condition(t, "small", map[string]any{"x": 9})},
	}
	sets := mustModel(t, "model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define a: [user, user with small]\n    define b: [user]\n"+
		"    define both: a and b\n    define only: a but not b\n"+smallAndFlag)
	setTuples := []*openfgav1.TupleKey{
		{Object: "doc:1", Relation: "a", User: "user:1"},
		{Object: "doc:2", Relation: "a", User: "user:1"},
		{Object: "doc:2", Relation: "b", User: "user:1"},
		{Object: "doc:3", Relation: "a", User: "user:1", Condition: condition(t, "small", map[string]any{"x": 12})},
		{Object: "doc:3", Relation: "b", User: "user:1"},
		{Object: "doc:4", Relation: "b", User: "user:1"},
	}
	for _, c := range []struct {
		name       string
		m          *Model
		tuples     []*openfgav1.TupleKey
		contextual []*openfgav1.TupleKey
		typ, rel   string
		user       string
		reqCtx     map[string]any
		want       string
	}{
		{"a failing tuple on no object's path", seed14, seed14Tuples, nil, "t2", "r1", "user:2", nil, "error 2000"},
		{"the parameter given", seed14, seed14Tuples, nil, "t0", "r0", "user:2", map[string]any{"x": 3}, "[0]"},
		{"a condition that does not hold", seed14, seed14Tuples, nil, "t0", "r1", "user:2", map[string]any{"x": 30}, "[]"},
		{"stored tuple alone", seed1111, seed1111Tuples, nil, "t0", "r0", "user:9", nil, "[0 1]"},
		{"contextual beside stored", seed1111, seed1111Tuples, []*openfgav1.TupleKey{
			{Object: "t0:0", Relation: "r0", User: "user:*", Condition: condition(t, "small", nil)},
		}, "t0", "r0", "user:9", nil, "error 2000"},
		{"and", sets, setTuples, nil, "doc", "both", "user:1", nil, "[2]"},
		{"but not", sets, setTuples, nil, "doc", "only", "user:1", nil, "[1]"},
		{"user with no tuples", sets, setTuples, nil, "doc", "only", "user:2", nil, "[]"},
	} {
		r, err := c.m.Reader(storeWith(t, c.m, c.tuples...), c.contextual, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := listAnswer(t, c.m, r, c.typ, c.rel, c.user, c.reqCtx); got != c.want {
			t.Errorf("%s: ListObjects %s#%s@%s = %s (%v); want %s", c.name, c.typ, c.rel, c.user, got, err, c.want)
		}
	}
}

// Where OpenFGA v1.22.1 does not answer ListObjects by its pipeline (a wildcard or
// subject set user), it walks up from the user by its reverse expansion, failing on
// any tuple it reads whose condition lacks a parameter (under its default result
// cap) and checking the objects it reached through `but not`: t1:1 and t1:2 are
// reached, the check keeps t1:1, and the tuple t0:2#r0@user:* lacking x, read by no
// check of t1:1, fails nothing. Each answer is OpenFGA v1.22.1's (the differential
// test's seeds 143 and 1063).
func TestListObjectsReverseExpandsAsOpenFGA(t *testing.T) {
	seed1063 := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r0: [user:* with small, user:*]\n"+
		"type t1\n  relations\n    define r0: ([user:*, user with flag]) but not r0 from r1\n    define r1: [t0]\n    define r2: r0\n"+smallAndFlag)
	seed1063Tuples := []*openfgav1.TupleKey{
		{Object: "t0:2", Relation: "r0", User: "user:*", Condition: condition(t, "small", nil)},
		{Object: "t0:1", Relation: "r0", User: "user:*"},
		{Object: "t1:1", Relation: "r1", User: "t0:2"},
		{Object: "t1:1", Relation: "r0", User: "user:*"},
		{Object: "t1:2", Relation: "r0", User: "user:*"},
		{Object: "t1:2", Relation: "r1", User: "t0:1"},
	}
	seed143 := mustModel(t, "model\n  schema 1.1\ntype user\ntype t0\n  relations\n    define r0: [user, t0#r1]\n"+
		"    define r1: [user:* with small, t1]\n    define r2: ([t0#r1, user:* with small]) but not r1\n"+
		"type t1\n  relations\n    define r0: [user:*, t1#r1]\n    define r1: r0\n"+smallAndFlag)
	seed143Tuples := []*openfgav1.TupleKey{
		{Object: "t0:0", Relation: "r1", User: "user:*", Condition: condition(t, "small", nil)},
		{Object: "t0:2", Relation: "r1", User: "user:*", Condition: condition(t, "small", map[string]any{"x": 8})},
		{Object: "t0:0", Relation: "r0", User: "t0:0#r1"},
	}
	for _, c := range []struct {
		m        *Model
		tuples   []*openfgav1.TupleKey
		typ, rel string
		user     string
		reqCtx   map[string]any
		want     string
	}{
		{seed1063, seed1063Tuples, "t1", "r0", "user:*", nil, "[1]"},
		{seed1063, seed1063Tuples, "t1", "r2", "user:*", nil, "[1]"},
		{seed1063, seed1063Tuples, "t0", "r0", "user:*", nil, "error 2000"},
		{seed1063, seed1063Tuples, "t0", "r0", "user:*", map[string]any{"x": 3}, "[1 2]"},
		{seed143, seed143Tuples, "t0", "r1", "user:*", nil, "error 2000"},
		{seed143, seed143Tuples, "t0", "r1", "user:*", map[string]any{"x": 2}, "[0 2]"},
		{seed143, seed143Tuples, "t0", "r2", "user:*", map[string]any{"x": 2}, "[]"},
		{seed143, seed143Tuples, "t0", "r0", "t0:0#r1", nil, "[0]"},
		{seed143, seed143Tuples, "t0", "r1", "t0:0#r1", nil, "[0]"},
	} {
		if got, err := listAnswer(t, c.m, storeWith(t, c.m, c.tuples...), c.typ, c.rel, c.user, c.reqCtx); got != c.want {
			t.Errorf("ListObjects %s#%s@%s %v = %s (%v); want %s", c.typ, c.rel, c.user, c.reqCtx, got, err, c.want)
		}
	}
}
