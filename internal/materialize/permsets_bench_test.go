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
// diffs one revision moving a user between groups (a WatchPermissionSets revision).
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
			events, err := p.diff(ctx, g, at-1, at, g.pairsOf(nil, &x))
			if err != nil || len(events) != 1 {
				b.Fatalf("%v, %v", events, err)
			}
		}
	})
}
