package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

const (
	benchRels      = 1_000_000
	benchPerDoc    = 10
	benchUsers     = benchRels / benchPerDoc // users per relationship stay the same at every size
	benchBatchSize = 10_000
)

// benchRelationship returns the i-th of n relationships of the benchmark data set:
// documents with ten relationships each (viewers, editors, an owner, some group
// members as viewers), subjects drawn from n/10 users and n/200 groups.
func benchRelationship(rnd *rand.Rand, i, n int) rel.Relationship {
	users, groups := n/benchPerDoc, n/200
	r := rel.Relationship{Resource: rel.ObjectRef{Type: "document", ID: fmt.Sprint("doc-", i/benchPerDoc)}}
	switch i % benchPerDoc {
	case 0:
		r.Relation = "owner"
	case 1, 2:
		r.Relation = "editor"
	default:
		r.Relation = "viewer"
	}
	if i%benchPerDoc == 9 {
		r.Subject = rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: fmt.Sprint("group-", rnd.IntN(groups))}, Relation: "member"}
	} else {
		// Unique per document: the slot index keeps two draws from colliding.
		r.Subject = rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("user-", (rnd.IntN(users/benchPerDoc)*benchPerDoc)+i%benchPerDoc)}}
	}
	return r
}

// load writes n benchmark relationships in batches.
func load(tb testing.TB, s *memory.Store, n int) {
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(1, 2))
	batch := make([]store.Update, 0, benchBatchSize)
	for i := range n {
		batch = append(batch, store.Update{Op: store.Touch, Relationship: benchRelationship(rnd, i, n)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := s.Write(ctx, nil, batch, nil); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// bulkLoad loads n benchmark relationships with one BulkLoad.
func bulkLoad(tb testing.TB, s *memory.Store, n int) {
	rnd := rand.New(rand.NewPCG(1, 2))
	_, err := s.BulkLoad(context.Background(), func(yield func(rel.Relationship, error) bool) {
		for i := range n {
			if !yield(benchRelationship(rnd, i, n), nil) {
				return
			}
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkLoad1M loads a million relationships by writes of 10,000 and reports the
// heap they occupy.
func BenchmarkLoad1M(b *testing.B) { benchmarkLoad(b, benchRels, load) }

// BenchmarkLoad10M is BenchmarkLoad1M at ten million relationships (about 40 s and
// 1 GiB of memory).
func BenchmarkLoad10M(b *testing.B) { benchmarkLoad(b, 10*benchRels, load) }

// BenchmarkBulkLoad1M loads a million relationships by one BulkLoad (the path of
// ImportBulkRelationships) and reports the relationships loaded per second (generating
// them included) and the heap they occupy.
func BenchmarkBulkLoad1M(b *testing.B) { benchmarkLoad(b, benchRels, bulkLoad) }

func benchmarkLoad(b *testing.B, n int, loader func(testing.TB, *memory.Store, int)) {
	b.ReportAllocs()
	var perRel float64
	for b.Loop() {
		before := heapAlloc()
		s := memory.New(memory.Options{GCInterval: -1})
		loader(b, s, n)
		after := heapAlloc()
		perRel = float64(after-before) / float64(n)
		if st := s.Stats(); st.Live != n {
			b.Fatalf("loaded %d relationships, want %d", st.Live, n)
		}
		runtime.KeepAlive(s)
		_ = s.Close()
	}
	b.ReportMetric(perRel, "bytes/rel")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rels/s")
}

var (
	benchOnce   sync.Once
	benchReader store.Reader
)

func benchStore(b *testing.B) store.Reader {
	benchOnce.Do(func() {
		s := memory.New(memory.Options{GCInterval: -1})
		load(b, s, benchRels)
		rev, err := s.HeadRevision(context.Background())
		if err == nil {
			benchReader, err = s.Reader(context.Background(), rev)
		}
		if err != nil {
			b.Fatal(err)
		}
	})
	return benchReader
}

func drain(b *testing.B, r store.Reader, f store.Filter) int {
	n := 0
	for _, err := range r.Query(context.Background(), f, store.QueryOptions{}) {
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	return n
}

func docIDs(rnd *rand.Rand, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("doc-", rnd.IntN(benchRels/benchPerDoc))
	}
	return ids
}

// BenchmarkQueryCheck is the engine's direct check: does a user (or the wildcard) hold
// a relation on any of a batch of documents.
func BenchmarkQueryCheck(b *testing.B) {
	r := benchStore(b)
	rnd := rand.New(rand.NewPCG(3, 4))
	filters := make([]store.Filter, 1024)
	for i := range filters {
		filters[i] = store.Filter{
			ResourceType: "document", ResourceIDs: docIDs(rnd, 10), Relation: "viewer",
			Subject: &store.SubjectFilter{Type: "user", IDs: []string{fmt.Sprint("user-", rnd.IntN(benchUsers)), rel.Wildcard}},
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		drain(b, r, filters[i%len(filters)])
		i++
	}
}

// BenchmarkQueryForward reads every relationship of a batch of ten documents.
func BenchmarkQueryForward(b *testing.B) {
	r := benchStore(b)
	rnd := rand.New(rand.NewPCG(5, 6))
	filters := make([]store.Filter, 1024)
	for i := range filters {
		filters[i] = store.Filter{ResourceType: "document", ResourceIDs: docIDs(rnd, 10)}
	}
	b.ReportAllocs()
	i, n := 0, 0
	for b.Loop() {
		n += drain(b, r, filters[i%len(filters)])
		i++
	}
	b.ReportMetric(float64(n)/float64(b.N), "rels/op")
}

// BenchmarkQueryReverse finds the documents a user views, as lookups do.
func BenchmarkQueryReverse(b *testing.B) {
	r := benchStore(b)
	rnd := rand.New(rand.NewPCG(7, 8))
	filters := make([]store.Filter, 1024)
	for i := range filters {
		filters[i] = store.Filter{
			ResourceType: "document", Relation: "viewer",
			Subject: &store.SubjectFilter{Type: "user", IDs: []string{fmt.Sprint("user-", rnd.IntN(benchUsers))}, RelationSet: true},
		}
	}
	b.ReportAllocs()
	i, n := 0, 0
	for b.Loop() {
		n += drain(b, r, filters[i%len(filters)])
		i++
	}
	b.ReportMetric(float64(n)/float64(b.N), "rels/op")
}

// BenchmarkQueryScanPage reads a type page by page, as exports do.
func BenchmarkQueryScanPage(b *testing.B) {
	r := benchStore(b)
	f := store.Filter{ResourceType: "document"}
	var after store.Cursor
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for item, err := range r.Query(context.Background(), f, store.QueryOptions{Limit: 1000, After: after}) {
			if err != nil {
				b.Fatal(err)
			}
			after = item.Cursor()
			n++
		}
		if n < 1000 {
			after = ""
		}
	}
}

// TestTableBytes checks that the tables TableBytes counts are most of a loaded store's
// heap, and not more (a few percent of slack for other live data that the collections
// around the load measure): gcpace leaves them out of the GC's pacing.
func TestTableBytes(t *testing.T) {
	const n = 200_000
	before := heapAlloc()
	s := memory.New(memory.Options{GCInterval: -1})
	defer s.Close()
	bulkLoad(t, s, n)
	heap := float64(heapAlloc() - before)
	if tables := float64(s.TableBytes()); tables > 1.05*heap || tables < 0.8*heap {
		t.Fatalf("TableBytes is %.0f bytes of a store whose heap is %.0f", tables, heap)
	}
}
