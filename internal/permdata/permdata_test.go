package permdata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/perm"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

const docSchema = `
entity user {}
entity doc {
	relation owner @user
	attribute public boolean
	attribute size integer
	attribute limit integer
	permission view = owner or public or small(size)
	permission fits = within(size, limit)
}
rule small(size integer) { size < 10 }
rule within(size integer, limit integer) { size < limit }
`

type fixture struct {
	ctx context.Context
	st  *memory.Store
	s   *Schema
	eng *engine.Engine
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	compiled, err := perm.CompileWith(docSchema, perm.Options{PermifyNames: true})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(memory.Options{GCInterval: -1})
	t.Cleanup(func() { st.Close() })
	return &fixture{ctx: context.Background(), st: st, s: NewSchema(compiled), eng: engine.New(engine.Config{})}
}

func (f *fixture) head(t *testing.T) store.Reader {
	t.Helper()
	rev, err := f.st.HeadRevision(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.st.Reader(f.ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) setAttributes(t *testing.T, attrs ...Attribute) {
	t.Helper()
	var b Batch
	if err := f.s.AttributeUpdates(f.ctx, f.head(t), attrs, &b); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Write(f.ctx, nil, b.Updates, nil); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) can(t *testing.T, doc string) string {
	t.Helper()
	res, err := f.eng.Check(f.ctx, f.s.IR, f.head(t), engine.CheckRequest{
		Resource: rel.ObjectRef{Type: "doc", ID: doc}, Permission: "view",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "anyone"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return Result(res.Membership)
}

func attr(doc, name, value string) Attribute {
	return Attribute{Entity: rel.ObjectRef{Type: "doc", ID: doc}, Name: name, Value: json.RawMessage(value)}
}

// TestUnchangedRefusesStaleReads: a write that completed a rule call's arguments
// from stored values commits only while those values are still the stored ones, so a
// concurrent write of another attribute of the entity is never overwritten.
func TestUnchangedRefusesStaleReads(t *testing.T) {
	f := newFixture(t)
	var stale Batch
	if err := f.s.AttributeUpdates(f.ctx, f.head(t), []Attribute{attr("a", "size", "3")}, &stale); err != nil {
		t.Fatal(err)
	}
	f.setAttributes(t, attr("a", "limit", "5"))
	if _, err := f.st.Write(f.ctx, nil, stale.Updates, stale.Unchanged()); !errors.Is(err, ErrAttributeChanged) {
		t.Fatalf("write computed from limit before it was set: %v, want ErrAttributeChanged", err)
	}
	var fresh Batch
	if err := f.s.AttributeUpdates(f.ctx, f.head(t), []Attribute{attr("a", "size", "3")}, &fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Write(f.ctx, nil, fresh.Updates, fresh.Unchanged()); err != nil {
		t.Fatalf("the same write lowered again at the new head: %v", err)
	}
	var whole Batch
	if err := f.s.AttributeUpdates(f.ctx, f.head(t), []Attribute{attr("a", "size", "1"), attr("a", "limit", "2")}, &whole); err != nil {
		t.Fatal(err)
	}
	if whole.Unchanged() != nil {
		t.Error("a write setting every argument of its rule calls depends on stored values")
	}
}

// TestAttributeLowering: attribute values and the rule calls over them become
// relationships the engine evaluates, and a rule's other arguments come from stored
// values, or Permify's zero values when never written.
func TestAttributeLowering(t *testing.T) {
	f := newFixture(t)
	f.setAttributes(t, attr("a", "public", "true"), attr("b", "size", `{"@type": "type.googleapis.com/base.v1.IntegerValue", "data": 42}`))
	if got := f.can(t, "a"); got != Allowed {
		t.Errorf("public doc: %s", got)
	}
	if got := f.can(t, "b"); got != Denied {
		t.Errorf("large private doc: %s", got)
	}
	f.setAttributes(t, attr("b", "size", "3"))
	if got := f.can(t, "b"); got != Allowed {
		t.Errorf("doc made small: %s", got)
	}
	f.setAttributes(t, attr("c", "public", "false"))
	if got := f.can(t, "c"); got != Denied {
		t.Errorf("doc with only public=false: %s", got)
	}
	vals, err := f.s.Attributes(f.ctx, f.head(t), AttributeFilter{Type: "doc", IDs: []string{"b"}})
	if err != nil || len(vals) != 1 || vals[0].Attribute != "size" || vals[0].Value != 3.0 || vals[0].Type != "integer" {
		t.Errorf("Attributes(doc:b) = %+v, %v; want size 3", vals, err)
	}
	var b Batch
	if err := f.s.AttributeDeletes(f.ctx, f.head(t), AttributeFilter{Type: "doc", IDs: []string{"b"}, Attributes: []string{"size"}}, &b); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Write(f.ctx, nil, b.Updates, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.can(t, "b"); got != Denied {
		t.Errorf("after deleting size, the rule over it still grants: %s", got)
	}
}

func TestAttributeErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		a    Attribute
		want AttributeProblem
	}{
		{attr("a", "colour", `"red"`), UnknownAttribute},
		{attr("a b", "public", "true"), InvalidEntityID},
		{attr("a", "public", `"yes"`), ValueTypeMismatch},
		{attr("a", "size", "1.5"), ValueTypeMismatch},
	} {
		var b Batch
		err := f.s.AttributeUpdates(f.ctx, f.head(t), []Attribute{attr("ok", "public", "true"), tc.a}, &b)
		var ae *AttributeError
		if !errors.As(err, &ae) || ae.Problem != tc.want || ae.Index != 1 {
			t.Errorf("%s=%s: %v; want problem %d at index 1", tc.a.Name, tc.a.Value, err, tc.want)
		}
	}
}

func TestCheckTuple(t *testing.T) {
	s := newFixture(t).s
	for _, tc := range []struct {
		tuple string
		ok    bool
	}{
		{"doc:a#owner@user:u", true},
		{"doc:a#owner@doc:b", false},   // subject type not allowed
		{"doc:a#public@user:*", false}, // an attribute's relation is not a tuple relation
		{"doc:a#view@user:u", false},   // a permission
		{"folder:a#owner@user:u", false},
	} {
		r, err := rel.Parse(tc.tuple)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CheckTuple(r); (err == nil) != tc.ok {
			t.Errorf("CheckTuple(%s) = %v; want ok=%v", tc.tuple, err, tc.ok)
		}
	}
}

// TestIDPage checks the bounded page against sorting every id: for random ids with
// repeats, each page after a bound holds the least ids above it, and says rightly
// whether more follow.
func TestIDPage(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	for trial := range 300 {
		n := rnd.IntN(60)
		var ids []string
		for range n {
			ids = append(ids, fmt.Sprintf("u%02d", rnd.IntN(40)))
		}
		all := slices.Compact(slices.Sorted(slices.Values(ids)))
		after := ""
		if rnd.IntN(2) == 0 {
			after = fmt.Sprintf("u%02d", rnd.IntN(40))
		}
		size := rnd.IntN(8)
		want := all[:0:0]
		for _, id := range all {
			if id > after {
				want = append(want, id)
			}
		}
		wantMore := size > 0 && len(want) > size
		if wantMore {
			want = want[:size]
		}
		p := newIDPage(after, size)
		for _, id := range ids {
			p.add(id)
		}
		got, more := p.result()
		if !slices.Equal(got, want) || more != wantMore {
			t.Fatalf("trial %d: page of %d after %q from %v = %v (more %v), want %v (more %v)", trial, size, after, ids, got, more, want, wantMore)
		}
	}
}
