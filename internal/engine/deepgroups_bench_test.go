//go:build unix

package engine_test

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/bench/dataset"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/store/pebble"
)

var deepUsers = flag.Int("deep-users", 20_000, "users in the deepgroups data set for benchmarks (20,000 ≈ 206k relationships; 200,000 is the reference size)")

var (
	deepOnce  sync.Once
	deep      socialFixture
	deepStore *memory.Store // deep's store, which an index may follow
	deepErr   error
)

// loadDeepGroups builds the deepgroups data set in a memory store once per test binary.
func loadDeepGroups(b *testing.B) socialFixture {
	b.Helper()
	deepOnce.Do(func() {
		deepStore = memory.New(memory.Options{})
		deep, deepErr = bulkLoadDataset(deepStore, dataset.DeepGroupsFor(*deepUsers, 1))
	})
	if deepErr != nil {
		b.Fatal(deepErr)
	}
	return deep
}

// BenchmarkCheckDeepGroups measures one in-process check of the deepgroups data set,
// uncached, the case a walking evaluator pays most for:
// go test ./internal/engine -run '^$' -bench CheckDeepGroups -benchmem -count 6 | benchstat
//
// negative draws document checks of random users (nearly all negative: the evaluator
// walks every group tree under the groups a document reaches); positive checks
// document d<i> for user u<i>, which the data set links through a chain of groups;
// top-group checks the access of a top-level group (g0..g9), most of the organisation
// below it. 1,024 checks are drawn from a fixed seed, the same in every run, and
// repeated; -benchtime Nx with N below that asks the first N.
func BenchmarkCheckDeepGroups(b *testing.B) {
	ds := dataset.DeepGroupsFor(*deepUsers, 1)
	var rnd *rand.Rand
	user := func(i int) rel.SubjectRef {
		return rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: dataset.User(i)}}
	}
	draws := map[string]func() engine.CheckRequest{
		"negative": func() engine.CheckRequest {
			return engine.CheckRequest{
				Resource:   rel.ObjectRef{Type: "document", ID: dataset.Document(rnd.IntN(ds.Documents))},
				Permission: "view", Subject: user(rnd.IntN(ds.Users)),
			}
		},
		"positive": func() engine.CheckRequest {
			i := rnd.IntN(min(ds.Users, ds.Documents))
			return engine.CheckRequest{Resource: rel.ObjectRef{Type: "document", ID: dataset.Document(i)}, Permission: "view", Subject: user(i)}
		},
		"top-group": func() engine.CheckRequest {
			return engine.CheckRequest{
				Resource:   rel.ObjectRef{Type: "group", ID: dataset.Group(rnd.IntN(dataset.DeepTopGroups))},
				Permission: "access", Subject: user(rnd.IntN(ds.Users)),
			}
		},
	}
	var onPebble *socialFixture
	var index *materialize.Index
	parent := b
	for _, store := range []string{"memory", "memory-index", "pebble"} {
		for _, kind := range []string{"negative", "positive", "top-group"} {
			b.Run(kind+"-"+store, func(b *testing.B) {
				f := loadDeepGroups(b)
				eng := engine.New(engine.Config{})
				switch store {
				case "pebble":
					if onPebble == nil {
						onPebble = loadDeepPebble(parent, ds)
					}
					f = *onPebble
				case "memory-index":
					if index == nil {
						index = startDeepIndex(parent, f)
					}
					eng = engine.New(engine.Config{Index: index})
				}
				rnd = rand.New(rand.NewPCG(7, 7)) // the same checks in every run, for benchstat
				items := make([]engine.CheckRequest, 1024)
				for i := range items {
					items[i] = draws[kind]()
				}
				benchmarkChecks(b, eng, f, items)
			})
		}
	}
}

// startDeepIndex builds the index of nested sets over f (the memory store's deepgroups
// data set), following it until b ends.
func startDeepIndex(b *testing.B, f socialFixture) *materialize.Index {
	b.Helper()
	x := materialize.New(materialize.Config{
		Store:    deepStore,
		SchemaAt: func(context.Context, store.Revision) (*ir.Schema, error) { return f.s, nil },
		Retain:   time.Hour,
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.Run(ctx)
	}()
	b.Cleanup(func() {
		stop()
		<-done
	})
	for st := x.Stats(); !st.Ready || st.Applied < f.reader.Revision(); st = x.Stats() {
		if st.Off {
			b.Fatal("the index turned itself off")
		}
		time.Sleep(time.Millisecond)
	}
	return x
}

// loadDeepPebble builds ds in a pebble store in a directory of b's, closed when b ends.
func loadDeepPebble(b *testing.B, ds dataset.Dataset) *socialFixture {
	b.Helper()
	st, err := pebble.Open(b.TempDir(), pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f, err := bulkLoadDataset(st, ds)
	if err != nil {
		b.Fatal(err)
	}
	return &f
}

// benchmarkChecks asks items in turn of eng (without a cache). Besides the time it
// reports the process's CPU time per check (cpu-ns/op), which a machine loaded by other
// work disturbs far less than the time.
func benchmarkChecks(b *testing.B, eng *engine.Engine, f socialFixture, items []engine.CheckRequest) {
	ctx := context.Background()
	allowed := 0
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := 0; b.Loop(); i++ {
		res, err := eng.Check(ctx, f.s, f.reader, items[i%len(items)])
		if err != nil {
			b.Fatal(err)
		}
		if res.Membership == engine.HasPermission {
			allowed++
		}
	}
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
	b.ReportMetric(float64(f.rels), "rels")
}

// reportCPU collects the garbage of what ran before, then starts counting the
// process's CPU time; the function it returns reports it per op (cpu-ns/op), which a
// machine loaded by other work disturbs far less than the time.
func reportCPU(b *testing.B) func() {
	runtime.GC()
	before := processCPU()
	return func() { b.ReportMetric(float64(processCPU()-before)/float64(b.N), "cpu-ns/op") }
}

// processCPU is the user and system CPU time the process has used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkLookupDeepGroups measures lookups of the deepgroups data set, uncached, with
// the index of nested sets (index) and without it (evaluate), in-process against the
// memory store:
// go test ./internal/engine -run '^$' -bench LookupDeepGroups -benchtime 20x
//
// resources-first and resources-all are LookupResources of document#view for the user
// of the first 64 who reaches the most documents (reported as results/op), to its
// first result and to its last; resources-page is the same lookup in id order (as a
// request with optional_limit runs) to its 1,000th result; subjects-top-group is
// LookupSubjects of the users of group#access of the top-level group with the most.
func BenchmarkLookupDeepGroups(b *testing.B) {
	f := loadDeepGroups(b)
	ctx := context.Background()
	x := startDeepIndex(b, f)
	engines := []struct {
		name string
		e    *engine.Engine
	}{{"index", engine.New(engine.Config{Index: x})}, {"evaluate", engine.New(engine.Config{})}}
	count := func(req engine.LookupResourcesRequest) int {
		n := 0
		if err := engines[0].e.LookupResources(ctx, f.s, f.reader, req, func(engine.FoundResource) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		return n
	}
	var lr engine.LookupResourcesRequest
	most := -1
	for i := range 64 {
		req := engine.LookupResourcesRequest{ResourceType: "document", Permission: "view", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: dataset.User(i)}}}
		if n := count(req); n > most {
			lr, most = req, n
		}
	}
	// groupsOnly reaches the most documents of the last 64 users who own none: its
	// documents all come through its groups.
	var groupsOnly engine.LookupResourcesRequest
	mostGroups := -1
	for i := range 64 {
		user := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: dataset.User(*deepUsers - 1 - i)}}
		if ownsDocuments(b, f, user) {
			continue
		}
		req := engine.LookupResourcesRequest{ResourceType: "document", Permission: "view", Subject: user}
		if n := count(req); n > mostGroups {
			groupsOnly, mostGroups = req, n
		}
	}
	var ls engine.LookupSubjectsRequest
	mostSubjects := -1
	for i := range dataset.DeepTopGroups {
		req := engine.LookupSubjectsRequest{Resource: rel.ObjectRef{Type: "group", ID: dataset.Group(i)}, Permission: "access", SubjectType: "user"}
		n := 0
		if err := engines[0].e.LookupSubjects(ctx, f.s, f.reader, req, func(engine.FoundSubject) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n > mostSubjects {
			ls, mostSubjects = req, n
		}
	}
	b.Logf("%d results for user %s, %d for user %s through groups only, %d subjects of %v; the index: %+v",
		most, lr.Subject.Object.ID, mostGroups, groupsOnly.Subject.Object.ID, mostSubjects, ls.Resource, x.Stats())
	errFirst := errors.New("first")
	for _, e := range engines {
		b.Run("resources-first/"+e.name, func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				if err := e.e.LookupResources(ctx, f.s, f.reader, lr, func(engine.FoundResource) error { return errFirst }); err != errFirst {
					b.Fatal(err)
				}
			}
		})
		b.Run("resources-first-groups/"+e.name, func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				if err := e.e.LookupResources(ctx, f.s, f.reader, groupsOnly, func(engine.FoundResource) error { return errFirst }); err != errFirst {
					b.Fatal(err)
				}
			}
		})
		b.Run("resources-page/"+e.name, func(b *testing.B) {
			defer reportCPU(b)()
			page := lr
			page.Ordered = true
			for b.Loop() {
				n := 0
				if err := e.e.LookupResources(ctx, f.s, f.reader, page, func(engine.FoundResource) error {
					if n++; n == 1000 {
						return errFirst
					}
					return nil
				}); err != errFirst {
					b.Fatal(err)
				}
			}
		})
		b.Run("resources-all/"+e.name, func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				n := 0
				if err := e.e.LookupResources(ctx, f.s, f.reader, lr, func(engine.FoundResource) error { n++; return nil }); err != nil || n != most {
					b.Fatalf("%d results (%v), want %d", n, err, most)
				}
			}
			b.ReportMetric(float64(most), "results/op")
		})
		b.Run("subjects-top-group/"+e.name, func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				n := 0
				if err := e.e.LookupSubjects(ctx, f.s, f.reader, ls, func(engine.FoundSubject) error { n++; return nil }); err != nil || n != mostSubjects {
					b.Fatalf("%d results (%v), want %d", n, err, mostSubjects)
				}
			}
			b.ReportMetric(float64(mostSubjects), "results/op")
		})
	}
}

// ownsDocuments reports whether user owns a document of f.
func ownsDocuments(b *testing.B, f socialFixture, user rel.SubjectRef) bool {
	filter := store.Filter{ResourceType: "document", Relation: "owner", Subject: &store.SubjectFilter{Type: user.Object.Type, IDs: []string{user.Object.ID}}}
	for _, err := range f.reader.Query(context.Background(), filter, store.QueryOptions{Limit: 1}) {
		if err != nil {
			b.Fatal(err)
		}
		return true
	}
	return false
}
