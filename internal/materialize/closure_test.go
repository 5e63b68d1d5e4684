package materialize

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// TestClosure: the child sets streamed are the closure of nesting (through subject
// sets, arrows and a cycle, a set never its own child), and a revision's changes are
// exactly the closure's: a nesting gone takes every pair it alone made, a second
// path to a set already held adds nothing, and removing one of two paths removes
// only what the other does not give.
func TestClosure(t *testing.T) {
	ctx := context.Background()
	s, err := schema.Compile(`
definition user {}
definition group {
	relation member: user | group#member
}
definition folder {
	relation parent: folder
	relation viewer: group#member
	permission view = viewer + parent->view
}
definition document {
	relation folder: folder
	relation viewer: user | group#member
	permission view = viewer + folder->view
}`)
	if err != nil {
		t.Fatal(err)
	}
	ms := memory.New(memory.Options{GCInterval: -1})
	defer ms.Close()
	p := NewPermissionSets(ms, func(context.Context, store.Revision) (*ir.Schema, error) { return s, nil },
		[]Target{{Resource: "document", Permission: "view", SubjectType: "user"}})
	write := func(op store.Op, xs ...string) store.Revision {
		t.Helper()
		var ups []store.Update
		for _, x := range xs {
			r, err := rel.Parse(x)
			if err != nil {
				t.Fatal(err)
			}
			ups = append(ups, store.Update{Op: op, Relationship: r})
		}
		rev, err := ms.Write(ctx, nil, ups, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	start := write(store.Touch,
		"group:backend#member@user:ann", "group:eng#member@group:backend#member",
		"group:eng#member@group:a#member", "group:a#member@group:b#member", "group:b#member@group:a#member",
		"document:d#viewer@group:eng#member",
		"folder:f0#viewer@group:backend#member", "folder:f1#parent@folder:f0", "document:d2#folder@folder:f1")
	want := []string{
		"document:d#view <- group:a#member", "document:d#view <- group:b#member",
		"document:d#view <- group:backend#member", "document:d#view <- group:eng#member",
		"document:d2#view <- folder:f0#view", "document:d2#view <- folder:f1#view", "document:d2#view <- group:backend#member",
		"folder:f0#view <- group:backend#member", "folder:f1#view <- folder:f0#view", "folder:f1#view <- group:backend#member",
		"group:a#member <- group:b#member", "group:b#member <- group:a#member", "group:backend#member <- user:ann",
		"group:eng#member <- group:a#member", "group:eng#member <- group:b#member", "group:eng#member <- group:backend#member",
	}
	if got := pairStrings(lookupAll(t, p, start, 3)); !slices.Equal(got, want) {
		t.Fatalf("lookup gives\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	revs := []store.Revision{
		write(store.Delete, "group:eng#member@group:a#member"),
		write(store.Touch, "document:d#viewer@group:backend#member"),
		write(store.Delete, "group:eng#member@group:backend#member"),
		write(store.Touch, "folder:f1#parent@folder:f1"),
	}
	wantChanges := [][]string{
		{
			"- document:d#view <- group:a#member", "- document:d#view <- group:b#member",
			"- group:eng#member <- group:a#member", "- group:eng#member <- group:b#member",
		},
		nil,
		{"- group:eng#member <- group:backend#member"},
		nil,
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var changes []string
	i := 0
	for ev, err := range p.Watch(wctx, ms, start, 0) {
		if err != nil {
			if wctx.Err() != nil {
				break
			}
			t.Fatal(err)
		}
		switch ev.Kind {
		case EventChange:
			op := "- "
			if ev.Added {
				op = "+ "
			}
			changes = append(changes, op+pairString(ev.Pair))
		case EventCompleted:
			slices.Sort(changes)
			if ev.Revision != revs[i] || !slices.Equal(changes, wantChanges[i]) {
				t.Fatalf("revision %d: changes\n%s\nwant at %d\n%s", ev.Revision, strings.Join(changes, "\n"), revs[i], strings.Join(wantChanges[i], "\n"))
			}
			changes, i = nil, i+1
		}
		if i == len(revs) {
			cancel()
		}
	}
	if i != len(revs) {
		t.Fatalf("%d revisions completed, want %d", i, len(revs))
	}
}

func pairString(p Pair) string {
	c := p.Child.Type + ":" + p.Child.ID
	if p.Child.IsSet {
		c += "#" + p.Child.Relation
	}
	return p.Set.String() + " <- " + c
}

func pairStrings(m map[Pair]bool) []string {
	var out []string
	for p := range m {
		out = append(out, pairString(p))
	}
	slices.Sort(out)
	return out
}
