package engine_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/bench/dataset"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/store/pebble"
)

var socialUsers = flag.Int("social-users", 100_000, "users in the social data set for benchmarks (100,000 ≈ 1.5M relationships)")

type socialFixture struct {
	s      *ir.Schema
	reader store.Reader
	rels   int
}

var (
	socialOnce sync.Once
	social     socialFixture
	socialErr  error
)

// loadSocial builds the social data set in a memory store once per test binary.
func loadSocial(b *testing.B) socialFixture {
	b.Helper()
	socialOnce.Do(func() { social, socialErr = bulkLoadSocial(memory.New(memory.Options{})) })
	if socialErr != nil {
		b.Fatal(socialErr)
	}
	return social
}

// loadSocialPebble builds the social data set in a pebble store in a directory of b's,
// closed when b ends.
func loadSocialPebble(b *testing.B) socialFixture {
	b.Helper()
	st, err := pebble.Open(b.TempDir(), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f, err := bulkLoadSocial(st)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// bulkLoader is a store that loads in bulk, as imports do.
type bulkLoader interface {
	BulkLoad(ctx context.Context, rels iter.Seq2[rel.Relationship, error]) (store.Revision, error)
	Reader(ctx context.Context, rev store.Revision) (store.Reader, error)
}

// bulkLoadSocial loads the social data set into st.
func bulkLoadSocial(st bulkLoader) (socialFixture, error) {
	return bulkLoadDataset(st, dataset.Social{Users: *socialUsers, Seed: 1})
}

// bulkLoadDataset loads ds into st.
func bulkLoadDataset(st bulkLoader, ds dataset.Dataset) (socialFixture, error) {
	ctx := context.Background()
	var f socialFixture
	var err error
	if f.s, err = schema.Compile(ds.Schema()); err != nil {
		return f, err
	}
	rev, err := st.BulkLoad(ctx, func(yield func(rel.Relationship, error) bool) {
		errStopped := errors.New("stopped")
		err := ds.Generate(func(r rel.Relationship) error {
			f.rels++
			if !yield(r, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && err != errStopped {
			yield(rel.Relationship{}, err)
		}
	})
	if err == nil {
		f.reader, err = st.Reader(ctx, rev)
	}
	return f, err
}

// BenchmarkCheckSocial measures one in-process check of the social workload's request
// mix against the memory store, and cached against pebble too:
// go test ./internal/engine -bench CheckSocial -benchmem
//
// uncached draws 4,096 checks and repeats them. The cached ones run like the server's
// benchmark: 2^20 checks drawn ahead (the social workload's subjects are Zipf-skewed),
// each asked once of a cache that starts empty, of 32 MiB (the server's default over
// pebble); after the last, a new cache starts over.
func BenchmarkCheckSocial(b *testing.B) {
	uncached := engine.New(engine.Config{})
	cached := func() *engine.Engine { return engine.New(engine.Config{Cache: cache.New(32 << 20)}) }
	b.Run("uncached", func(b *testing.B) {
		benchmarkCheckSocial(b, loadSocial(b), func() *engine.Engine { return uncached }, 1<<12)
	})
	b.Run("cached", func(b *testing.B) { benchmarkCheckSocial(b, loadSocial(b), cached, 1<<20) })
	var onPebble *socialFixture
	parent := b
	b.Run("cached-pebble", func(b *testing.B) {
		if onPebble == nil {
			f := loadSocialPebble(parent)
			onPebble = &f
		}
		benchmarkCheckSocial(b, *onPebble, cached, 1<<20)
	})
}

// benchmarkCheckSocial asks checks drawn checks of engines from fresh, a new one each
// time it has asked them all.
func benchmarkCheckSocial(b *testing.B, f socialFixture, fresh func() *engine.Engine, checks int) {
	draw := dataset.NewSocialChecks(*socialUsers, 2)
	items := make([]engine.CheckRequest, checks)
	for i := range items {
		c := draw.Next()
		items[i] = engine.CheckRequest{Resource: c.Resource, Permission: c.Permission, Subject: c.Subject}
	}
	eng := fresh()
	ctx := context.Background()
	allowed := 0
	b.ReportAllocs()
	gcBefore, cpuBefore := gcCPU()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%len(items) == 0 {
			b.StopTimer()
			eng = fresh()
			b.StartTimer()
		}
		res, err := eng.Check(ctx, f.s, f.reader, items[i%len(items)])
		if err != nil {
			b.Fatal(err)
		}
		if res.Membership == engine.HasPermission {
			allowed++
		}
	}
	b.StopTimer()
	if gcAfter, cpuAfter := gcCPU(); cpuAfter > cpuBefore {
		b.ReportMetric(100*(gcAfter-gcBefore)/(cpuAfter-cpuBefore), "gc-cpu-%")
	}
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
	b.ReportMetric(float64(f.rels), "rels")
}

// gcCPU returns the process's CPU seconds spent in garbage collection and in all, as
// the runtime estimates them.
func gcCPU() (gc, total float64) {
	samples := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(samples)
	return samples[0].Value.Float64(), samples[1].Value.Float64()
}

// BenchmarkLookupResourcesExclusion looks up 600,000 documents of `viewer - banned`
// for one user and reports the heap's high-water mark above the loaded store (sampled
// every 10 ms) and the time to the first result: a streamed lookup holds a chunk of
// candidates, not the answer.
func BenchmarkLookupResourcesExclusion(b *testing.B) {
	const n = 600_000
	ctx := context.Background()
	st, s := storeWithSchema(b, `definition user {}
definition doc {
	relation viewer: user
	relation banned: user
	permission view = viewer - banned
}`)
	u := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}}
	r := writeEach(b, st, n, func(i int) rel.Relationship {
		return rel.Relationship{Resource: rel.ObjectRef{Type: "doc", ID: fmt.Sprint("d", i)}, Relation: "viewer", Subject: u}
	})
	e := engine.New(engine.Config{})
	var first time.Duration
	var peakBytes uint64
	for b.Loop() {
		var found int
		var took time.Duration
		var err error
		peakBytes = max(peakBytes, peakHeap(func() {
			found, took, _, err = timedLookup(func(each func()) error {
				return e.LookupResources(ctx, s, r, engine.LookupResourcesRequest{ResourceType: "doc", Permission: "view", Subject: u},
					func(engine.FoundResource) error { each(); return nil })
			})
		}))
		first = max(first, took)
		if err != nil || found != n {
			b.Fatalf("found %d of %d: %v", found, n, err)
		}
	}
	b.ReportMetric(float64(peakBytes)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
}

// peakHeap runs run and returns the heap's high-water mark above where it started
// (after a collection), sampled every 10 ms.
func peakHeap(run func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	done := make(chan struct{})
	sampled := make(chan uint64)
	go func() {
		high := base
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			high = max(high, m.HeapAlloc)
			select {
			case <-done:
				sampled <- high - base
				return
			case <-tick.C:
			}
		}
	}()
	run()
	close(done)
	return <-sampled
}

// storeWithSchema returns an empty memory store, closed when b ends, and src compiled.
func storeWithSchema(b *testing.B, src string) (*memory.Store, *ir.Schema) {
	b.Helper()
	st := memory.New(memory.Options{})
	b.Cleanup(func() { st.Close() })
	s, err := schema.Compile(src)
	if err != nil {
		b.Fatal(err)
	}
	return st, s
}

// timedLookup runs lookup, which calls each for every result, and returns how many
// results came, the time to the first and the time to the end.
func timedLookup(lookup func(each func()) error) (found int, first, all time.Duration, err error) {
	start := time.Now()
	err = lookup(func() {
		if found == 0 {
			first = time.Since(start)
		}
		found++
	})
	return found, first, time.Since(start), err
}

// writeEach touches relationship(i) for i in [0, n) in st, 10,000 to a write, and
// returns a reader at the last write.
func writeEach(b *testing.B, st *memory.Store, n int, relationship func(i int) rel.Relationship) store.Reader {
	b.Helper()
	ctx := context.Background()
	updates := make([]store.Update, 0, 10_000)
	for i := range n {
		updates = append(updates, store.Update{Op: store.Touch, Relationship: relationship(i)})
		if len(updates) == cap(updates) || i == n-1 {
			if _, err := st.Write(ctx, nil, updates, nil); err != nil {
				b.Fatal(err)
			}
			updates = updates[:0]
		}
	}
	rev, err := st.HeadRevision(ctx)
	if err != nil {
		b.Fatal(err)
	}
	r, err := st.Reader(ctx, rev)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkLookupSubjectsExclusion looks up the 200,000 followers of one user through
// `(self + follower) - blocked` (100 of them blocked), and reports the heap's
// high-water mark and the time to the first result and to the last: the subjects
// stream in id order, merged from the store's reads, and none is held.
func BenchmarkLookupSubjectsExclusion(b *testing.B) {
	const n, blocked = 200_000, 100
	st, s := storeWithSchema(b, `definition user {
	relation self: user
	relation follower: user
	relation blocked: user
	permission view = (self + follower) - blocked
}`)
	star := rel.ObjectRef{Type: "user", ID: "star"}
	r := writeEach(b, st, n+blocked, func(i int) rel.Relationship {
		if i < n {
			return rel.Relationship{Resource: star, Relation: "follower", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("f", i)}}}
		}
		return rel.Relationship{Resource: star, Relation: "blocked", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("f", (i-n)*7)}}}
	})
	e := engine.New(engine.Config{})
	ctx := context.Background()
	var first, all time.Duration
	var peakBytes uint64
	for b.Loop() {
		var found int
		var took, tookAll time.Duration
		var err error
		peakBytes = max(peakBytes, peakHeap(func() {
			found, took, tookAll, err = timedLookup(func(each func()) error {
				return e.LookupSubjects(ctx, s, r, engine.LookupSubjectsRequest{Resource: star, Permission: "view", SubjectType: "user"},
					func(engine.FoundSubject) error { each(); return nil })
			})
		}))
		first, all = max(first, took), max(all, tookAll)
		if err != nil || found != n-blocked {
			b.Fatalf("found %d of %d: %v", found, n-blocked, err)
		}
	}
	b.ReportMetric(float64(peakBytes)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
	b.ReportMetric(float64(all.Microseconds())/1000, "all-ms")
}

// BenchmarkLookupResourcesNestedFolders looks up the 100,000 documents one user sees
// through `folder->view` over a tree of 1,111 folders (`viewer + parent->view`, the
// user a viewer of its root), and reports the time to the first result and to the
// last: the documents leave in chunks as the reverse read of `folder` finds them,
// once the folders are known.
func BenchmarkLookupResourcesNestedFolders(b *testing.B) {
	const folders, docs = 1111, 100_000
	st, s := storeWithSchema(b, `definition user {}
definition folder {
	relation parent: folder
	relation viewer: user
	permission view = viewer + parent->view
}
definition doc {
	relation folder: folder
	relation viewer: user
	permission view = viewer + folder->view
}`)
	u := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}}
	folder := func(i int) rel.SubjectRef {
		return rel.SubjectRef{Object: rel.ObjectRef{Type: "folder", ID: fmt.Sprint("f", i)}}
	}
	// f0 is the root, f1-f10 its children, f11-f110 theirs, f111-f1110 the leaves,
	// which hold the documents.
	r := writeEach(b, st, folders+docs, func(i int) rel.Relationship {
		switch {
		case i == 0:
			return rel.Relationship{Resource: folder(0).Object, Relation: "viewer", Subject: u}
		case i < folders:
			return rel.Relationship{Resource: folder(i).Object, Relation: "parent", Subject: folder((i - 1) / 10)}
		}
		d := i - folders
		return rel.Relationship{Resource: rel.ObjectRef{Type: "doc", ID: fmt.Sprint("d", d)}, Relation: "folder", Subject: folder(111 + d%1000)}
	})
	e := engine.New(engine.Config{})
	ctx := context.Background()
	var first, all time.Duration
	for b.Loop() {
		found, took, tookAll, err := timedLookup(func(each func()) error {
			return e.LookupResources(ctx, s, r, engine.LookupResourcesRequest{ResourceType: "doc", Permission: "view", Subject: u},
				func(engine.FoundResource) error { each(); return nil })
		})
		first, all = max(first, took), max(all, tookAll)
		if err != nil || found != docs {
			b.Fatalf("found %d of %d: %v", found, docs, err)
		}
	}
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
	b.ReportMetric(float64(all.Microseconds())/1000, "all-ms")
}
