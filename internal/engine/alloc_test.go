package engine_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/store"
)

// sliceReader is the smallest store.Reader: a slice scanned with Filter.Matches. The
// allocation budget below is the engine's own, not a store's.
type sliceReader []rel.Relationship

func (r sliceReader) Revision() store.Revision { return 1 }

func (r sliceReader) Schema(context.Context) (string, error) { return "", nil }

func (r sliceReader) Query(_ context.Context, f store.Filter, _ store.QueryOptions) iter.Seq2[store.Item, error] {
	return func(yield func(store.Item, error) bool) {
		now := time.Now()
		for _, x := range r {
			if f.Matches(x, now) && !yield(store.Item{Relationship: x}, nil) {
				return
			}
		}
	}
}

// visitingReader is a sliceReader that is also a store.Visiting, as the stores checks
// read are.
type visitingReader struct{ sliceReader }

func (r visitingReader) QueryEach(_ context.Context, f store.Filter, _ store.QueryOptions, v store.Visitor) error {
	now := time.Now()
	for _, x := range r.sliceReader {
		if f.Matches(x, now) && !v.Visit(store.Item{Relationship: x}) {
			return nil
		}
	}
	return nil
}

// TestDirectCheckAllocations holds the allocations of a check answered by one direct
// relationship to a budget, so a change that makes the hottest path allocate more
// shows up here rather than as a slow drift in benchmarks.
func TestDirectCheckAllocations(t *testing.T) {
	s, err := schema.Compile(`definition user {}
definition document {
	relation viewer: user
	permission view = viewer
}`)
	if err != nil {
		t.Fatal(err)
	}
	r := visitingReader{sliceReader{{
		Resource: rel.ObjectRef{Type: "document", ID: "readme"}, Relation: "viewer",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "amy"}},
	}}}
	eng := engine.New(engine.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		permission string
		budget     float64
	}{
		{"viewer", 10},
		{"view", 10},
	} {
		req := engine.CheckRequest{
			Resource: rel.ObjectRef{Type: "document", ID: "readme"}, Permission: tc.permission,
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "amy"}},
		}
		var res engine.Result
		allocs := testing.AllocsPerRun(200, func() { res, err = eng.Check(ctx, s, r, req) })
		if err != nil || res.Membership != engine.HasPermission {
			t.Fatalf("check %s: %v, %v", tc.permission, res, err)
		}
		t.Logf("check document:readme#%s@user:amy: %v allocations", tc.permission, allocs)
		if allocs > tc.budget+raceSlack {
			t.Errorf("check document:readme#%s@user:amy allocates %v times, budget %v", tc.permission, allocs, tc.budget+raceSlack)
		}
	}
}
