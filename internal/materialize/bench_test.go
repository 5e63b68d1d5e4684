package materialize

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// deepChecks are the checks of a benchmark and their answers.
type deepChecks struct {
	reqs []engine.CheckRequest
	want []engine.Membership
}

// BenchmarkDeepCheck checks documents shared with groups of an organisation 10 levels
// deep (Pareto fan-out, users mostly in the deepest groups) for random users, with
// the index and by evaluation alone, with no cache: negative checks (documents
// shared with groups two levels down, which most users are not under) and positive
// ones (documents shared with top-level groups the user is under).
func BenchmarkDeepCheck(b *testing.B) {
	ctx := context.Background()
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		b.Fatal(err)
	}
	ms, _, levels := nestedGroups(b, 7, 10, 3, 50000)
	defer ms.Close()
	var docs []store.Update
	for i, g := range append(levels[0], levels[2]...) {
		docs = append(docs, store.Update{Op: store.Touch, Relationship: rel.Relationship{
			Resource: rel.ObjectRef{Type: "document", ID: fmt.Sprint("d", i)}, Relation: "viewer",
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: g}, Relation: "member"},
		}})
	}
	rev, err := ms.Write(ctx, nil, docs, nil)
	if err != nil {
		b.Fatal(err)
	}
	x := New(Config{Store: ms, Retain: time.Hour})
	start := time.Now()
	st, err := x.build(ctx, planFor(s), rev)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d groups; build %v: %d nodes, %d entries, %d bytes (%.1f per entry)", countGroups(levels), time.Since(start),
		st.names.len(), st.entries.Load(), st.bytes.Load(), float64(st.bytes.Load())/float64(st.entries.Load()))
	x.cur.Store(st)
	reader, err := ms.Reader(ctx, rev)
	if err != nil {
		b.Fatal(err)
	}
	off, on := engine.New(engine.Config{}), engine.New(engine.Config{Index: x})
	rnd := rand.New(rand.NewPCG(3, 3))
	pos, neg := &deepChecks{}, &deepChecks{}
	for tries := 0; (len(neg.reqs) < 200 || len(pos.reqs) < 200) && tries < 100000; tries++ {
		req := engine.CheckRequest{
			Resource: rel.ObjectRef{Type: "document", ID: fmt.Sprint("d", rnd.IntN(len(docs)))}, Permission: "view",
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("u", rnd.IntN(50000))}},
		}
		res, err := off.Check(ctx, s, reader, req)
		if err != nil {
			b.Fatal(err)
		}
		dc := neg
		if res.Membership == engine.HasPermission {
			dc = pos
		}
		if len(dc.reqs) < 200 {
			dc.reqs, dc.want = append(dc.reqs, req), append(dc.want, res.Membership)
		}
	}
	for _, kind := range []struct {
		name string
		dc   *deepChecks
	}{{"negative", neg}, {"positive", pos}} {
		for _, e := range []struct {
			name string
			e    *engine.Engine
		}{{"index", on}, {"evaluate", off}} {
			b.Run(kind.name+"/"+e.name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					j := i % len(kind.dc.reqs)
					res, err := e.e.Check(ctx, s, reader, kind.dc.reqs[j])
					if err != nil || res.Membership != kind.dc.want[j] {
						b.Fatalf("%v: %v %v, want %v", kind.dc.reqs[j], res, err, kind.dc.want[j])
					}
				}
			})
		}
	}
}

func countGroups(levels [][]string) int {
	n := 0
	for _, l := range levels {
		n += len(l)
	}
	return n
}

// BenchmarkBuild builds the index of a nested-groups data set and reports its rate
// in relationships (edges) per second and its bytes per entry.
func BenchmarkBuild(b *testing.B) {
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		b.Fatal(err)
	}
	ms, rev, _ := nestedGroups(b, 9, 10, 3, 200000)
	defer ms.Close()
	x := New(Config{Store: ms, Retain: time.Hour})
	var st *state
	edges := 0
	for b.Loop() {
		if st, err = x.build(context.Background(), planFor(s), rev); err != nil {
			b.Fatal(err)
		}
	}
	for range storeItems(b, ms, rev) {
		edges++
	}
	b.ReportMetric(float64(edges)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
	b.ReportMetric(float64(st.bytes.Load())/float64(st.entries.Load()), "bytes/entry")
	b.ReportMetric(float64(st.entries.Load()), "entries")
}

// storeItems yields the group#member relationships at rev.
func storeItems(b *testing.B, ms store.Store, rev store.Revision) func(func(rel.Relationship) bool) {
	return func(yield func(rel.Relationship) bool) {
		r, err := ms.Reader(context.Background(), rev)
		if err != nil {
			b.Fatal(err)
		}
		for item, err := range r.Query(context.Background(), store.Filter{ResourceType: "group", Relation: "member"}, store.QueryOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
			if !yield(item.Relationship) {
				return
			}
		}
	}
}

// BenchmarkIndexLag writes to a nested-groups store at 1,000 writes a second, each
// moving a user from one group to another, while the index follows the store, and
// reports the lag from each write's commit to the index having applied its revision,
// as p50 and p99 (run it a fixed number of writes: -benchtime 3000x).
func BenchmarkIndexLag(b *testing.B) {
	ctx := context.Background()
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		b.Fatal(err)
	}
	ms, rev, levels := nestedGroups(b, 11, 10, 3, 50000)
	defer ms.Close()
	x := New(Config{
		Store:    ms,
		SchemaAt: func(context.Context, store.Revision) (*ir.Schema, error) { return s, nil },
		Retain:   time.Second,
	})
	ictx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.Run(ictx)
	}()
	defer func() {
		stop()
		<-done
	}()
	for st := x.Stats(); !st.Ready || st.Applied < rev; st = x.Stats() {
		time.Sleep(time.Millisecond)
	}
	type commit struct {
		rev store.Revision
		at  time.Time
	}
	commits := make(chan commit, 1<<16)
	var lags []time.Duration
	measured := make(chan struct{})
	go func() {
		defer close(measured)
		for c := range commits {
			st := x.cur.Load()
			if st == nil || !st.reached(ctx, c.rev, time.Minute) {
				b.Errorf("the index did not apply revision %d", c.rev)
				return
			}
			lags = append(lags, time.Since(c.at))
		}
	}()
	deepest := levels[len(levels)-1]
	rnd := rand.New(rand.NewPCG(11, 11))
	in := map[string]string{} // the group each moved user was moved to
	member := func(g, u string) rel.Relationship {
		return rel.Relationship{Resource: rel.ObjectRef{Type: "group", ID: g}, Relation: "member", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: u}}}
	}
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Millisecond)))
		u := fmt.Sprint("u", rnd.IntN(50000))
		to := deepest[rnd.IntN(len(deepest))]
		updates := []store.Update{{Op: store.Touch, Relationship: member(to, u)}}
		if from, ok := in[u]; ok && from != to {
			updates = append(updates, store.Update{Op: store.Delete, Relationship: member(from, u)})
		}
		in[u] = to
		r, err := ms.Write(ctx, nil, updates, nil)
		if err != nil {
			b.Fatal(err)
		}
		commits <- commit{r, time.Now()}
	}
	close(commits)
	<-measured
	slices.Sort(lags)
	if len(lags) > 0 {
		b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "p99-ms")
	}
}
