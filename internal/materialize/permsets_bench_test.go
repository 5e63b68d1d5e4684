package materialize

import (
	"context"
	"fmt"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// BenchmarkPermissionSets reads the permission sets of document#view@user over an
// organisation of nested groups 10 levels deep (LookupPermissionSets, whole), and
// diffs one revision moving a user into a group and one moving a group into another
// (WatchPermissionSets revisions).
func BenchmarkPermissionSets(b *testing.B) {
	ctx := context.Background()
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		b.Fatal(err)
	}
	ms, rev, levels := nestedGroups(b, 7, 10, 3, 50000)
	defer ms.Close()
	p := NewPermissionSets(ms, func(context.Context, store.Revision) (*ir.Schema, error) { return s, nil },
		[]Target{{Resource: "document", Permission: "view", SubjectType: "user"}})
	b.Run("lookup", func(b *testing.B) {
		pairs := 0
		for b.Loop() {
			pairs = 0
			if err := p.Lookup(ctx, rev, LookupPosition{}, func(Pair, LookupPosition) bool { pairs++; return true }); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(pairs)*float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	})
	b.Run("revision", func(b *testing.B) {
		deep := levels[len(levels)-1]
		g, _, err := p.graphAt(ctx, rev)
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			x := rel.Relationship{
				Resource: rel.ObjectRef{Type: "group", ID: deep[i%len(deep)]}, Relation: "member",
				Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("moved", i)}},
			}
			i++
			at, err := ms.Write(ctx, nil, []store.Update{{Op: store.Touch, Relationship: x}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			var events []SetEvent
			_, err = p.diff(ctx, g, at-1, at, g.pairsOf(nil, &x), func(ev SetEvent) bool { events = append(events, ev); return true })
			if err != nil || len(events) != 1 {
				b.Fatalf("%v, %v", events, err)
			}
		}
	})
	// A revision putting a group of the sixth level into one more group of the
	// fifth, or taking it out again: the closure's pairs of every set below it with
	// every set above the new parent change.
	b.Run("group", func(b *testing.B) {
		g, _, err := p.graphAt(ctx, rev)
		if err != nil {
			b.Fatal(err)
		}
		i, pairs := 0, 0
		for b.Loop() {
			n := i / 2
			x := rel.Relationship{
				Resource: rel.ObjectRef{Type: "group", ID: levels[4][n*7%len(levels[4])]}, Relation: "member",
				Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: levels[5][n%len(levels[5])]}, Relation: "member"},
			}
			op := store.Touch
			if i%2 == 1 {
				op = store.Delete
			}
			i++
			at, err := ms.Write(ctx, nil, []store.Update{{Op: op, Relationship: x}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.diff(ctx, g, at-1, at, g.pairsOf(nil, &x), func(SetEvent) bool { pairs++; return true }); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(pairs)/float64(b.N), "pairs/revision")
	})
}
