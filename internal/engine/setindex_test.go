package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/engine/enginetest"
	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

var _ engine.SetIndex = (*materialize.Index)(nil)

// indexedStore is a memory store written to over several revisions, with a
// materialized index following it, and the relationships live at each revision.
type indexedStore struct {
	t     *testing.T
	st    *memory.Store
	x     *materialize.Index
	live  map[rel.Key]rel.Relationship
	snaps map[store.Revision][]rel.Relationship
	revs  []store.Revision
	stop  func()
}

func newIndexedStore(t *testing.T, s *ir.Schema, initial []rel.Relationship, cfg materialize.Config) *indexedStore {
	t.Helper()
	is := &indexedStore{t: t, st: memory.New(memory.Options{GCInterval: -1}), live: map[rel.Key]rel.Relationship{}, snaps: map[store.Revision][]rel.Relationship{}}
	is.write(initial, nil)
	cfg.Store = is.st
	cfg.SchemaAt = func(context.Context, store.Revision) (*ir.Schema, error) { return s, nil }
	is.x = materialize.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		is.x.Run(ctx)
	}()
	is.stop = func() {
		cancel()
		<-done
		is.st.Close()
	}
	is.await(is.revs[len(is.revs)-1])
	return is
}

// engines returns two engines of depth limit maxDepth (0: the default), one without
// an index and one with the store's index, its answers to lookups counted, and a
// reader at the newest revision.
func (is *indexedStore) engines(maxDepth int) (x *setsCounter, off, on *engine.Engine, reader store.Reader) {
	is.t.Helper()
	x = &setsCounter{SetIndex: is.x}
	reader, err := is.st.Reader(context.Background(), is.revs[len(is.revs)-1])
	if err != nil {
		is.t.Fatal(err)
	}
	return x, engine.New(engine.Config{MaxDepth: maxDepth}), engine.New(engine.Config{MaxDepth: maxDepth, Index: x}), reader
}

// write touches touch and deletes del in one revision.
func (is *indexedStore) write(touch, del []rel.Relationship) {
	is.t.Helper()
	var updates []store.Update
	for _, x := range touch {
		updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
		is.live[x.Key()] = x
	}
	for _, x := range del {
		if _, ok := is.live[x.Key()]; ok {
			updates = append(updates, store.Update{Op: store.Delete, Relationship: x})
			delete(is.live, x.Key())
		}
	}
	rev, err := is.st.Write(context.Background(), nil, updates, nil)
	if err != nil {
		is.t.Fatal(err)
	}
	snap := make([]rel.Relationship, 0, len(is.live))
	for _, x := range is.live {
		snap = append(snap, x)
	}
	slices.SortFunc(snap, func(a, b rel.Relationship) int { return store.CompareKeys(a.Key(), b.Key()) })
	is.snaps[rev] = snap
	is.revs = append(is.revs, rev)
}

// await waits until the index is built and has applied rev, or has turned itself off.
// It waits for a condition, not for a time: the bound only ends a test that would
// hang.
func (is *indexedStore) await(rev store.Revision) {
	is.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := is.x.Stats()
		if (st.Ready && st.Applied >= rev) || st.Off {
			return
		}
		if time.Now().After(deadline) {
			is.t.Fatalf("the index did not apply revision %d: %+v", rev, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// history is a random schema's relationships written over several revisions to a
// store that an index follows, while more writes go on (writing closes when they end).
type history struct {
	g       *enginetest.Gen
	s       *ir.Schema
	src     string
	is      *indexedStore
	now     time.Time
	writing chan struct{}
}

// newHistory writes the history of seed, with nested sets on top of opts (and for an
// even seed, chains: folders in folders), or returns
// nil when its schema does not compile. A third of the indexes keep only the newest
// revision (older reads fall back and their versions are pruned under the readers), a
// third have too little memory to hold every set (some are dropped, or the index turns
// itself off).
func newHistory(t *testing.T, seed uint64, opts enginetest.Options) *history {
	t.Helper()
	const writes = 6
	opts.Nested = true
	opts.Chains = seed%2 == 0
	g := enginetest.New(rand.New(rand.NewPCG(seed, 33)), opts)
	src := g.Schema()
	s, err := schema.Compile(src)
	if err != nil {
		return nil
	}
	now := time.Now()
	cfg := materialize.Config{Retain: time.Hour}
	switch seed % 3 {
	case 1:
		cfg.Retain = time.Nanosecond
	case 2:
		// The nodes' first chunk and the names take 266,240 bytes, the set graph a
		// few thousand more: what is left holds some of the subjects and
		// ancestors, or none (the index turns itself off).
		cfg.MaxBytes = 266240 + 1500 + int64(g.Rnd.IntN(3000))
	}
	is := newIndexedStore(t, s, g.Relationships(10+g.Rnd.IntN(30), now), cfg)
	for range writes {
		var del []rel.Relationship
		for _, x := range is.live {
			if g.Rnd.IntN(6) == 0 {
				del = append(del, x)
			}
		}
		slices.SortFunc(del, func(a, b rel.Relationship) int { return store.CompareKeys(a.Key(), b.Key()) })
		touch := g.Relationships(1+g.Rnd.IntN(6), now)
		touch = slices.DeleteFunc(touch, func(x rel.Relationship) bool {
			return slices.ContainsFunc(del, func(d rel.Relationship) bool { return d.Key() == x.Key() })
		})
		is.write(touch, del)
	}
	is.await(is.revs[len(is.revs)-1])
	// Writes go on while the test reads the revisions before them, so that the index
	// applies, publishes and prunes under the readers.
	more := enginetest.New(rand.New(rand.NewPCG(seed, 33)), opts)
	more.Schema()
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for range 10 {
			var updates []store.Update
			for _, x := range more.Relationships(1+more.Rnd.IntN(4), now) {
				updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
			}
			if _, err := is.st.Write(context.Background(), nil, updates, nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return &history{g: g, s: s, src: src, is: is, now: now, writing: writing}
}

// TestChecksAgreeWithIndex holds the engine with a materialized index (with and
// without the cache) to the engine without one and to the reference evaluator, on
// random schemas with nested subject sets, cycles, arrows, exclusions, intersections,
// caveats, expiration and wildcards, at every revision of a history of writes, while
// more writes go on: the answers, errors included, are the same with the index on or
// off (see newHistory for the indexes' configurations).
func TestChecksAgreeWithIndex(t *testing.T) {
	const schemas, checks = 100, 12
	ctx := context.Background()
	indexed, turnedOff := 0, 0
	var answered int64
	for seed := range uint64(schemas) {
		h := newHistory(t, seed, enginetest.AllTraits)
		if h == nil {
			continue
		}
		g, s, src, is, now := h.g, h.s, h.src, h.is, h.now
		off := engine.New(engine.Config{MaxDepth: 12})
		on := engine.New(engine.Config{MaxDepth: 12, Index: is.x})
		onCached := engine.New(engine.Config{MaxDepth: 12, Index: is.x, Cache: cache.New(1 << 16)})
		for _, rev := range is.revs {
			reader, err := is.st.Reader(ctx, rev)
			if err != nil {
				t.Fatal(err)
			}
			for range checks {
				d := g.Pick(g.Defs[1:])
				perm := g.Pick(g.Names(d))
				subj := rel.SubjectRef{Object: g.Object("user")}
				if g.Rnd.IntN(5) == 0 {
					subj = g.SubjectSet()
				}
				reqCtx := g.Context()
				var reqs []engine.CheckRequest
				for _, id := range enginetest.IDs(d)[:1+g.Rnd.IntN(4)] {
					reqs = append(reqs, engine.CheckRequest{Resource: rel.ObjectRef{Type: d, ID: id}, Permission: perm, Subject: subj, Context: reqCtx})
				}
				want := off.CheckBulk(ctx, s, reader, reqs)
				for i, e := range []*engine.Engine{on, onCached, onCached} {
					got := e.CheckBulk(ctx, s, reader, reqs)
					for j := range reqs {
						if !sameBulk(got[j], want[j]) {
							t.Fatalf("seed %d revision %d engine %d: %v %v: index on %+v, off %+v\nschema:\n%s\nrels:\n%s",
								seed, rev, i, reqs[j].Resource, reqs[j].Permission+"@"+subj.String(), got[j], want[j], src, enginetest.Dump(is.snaps[rev]))
						}
					}
					one, err := e.Check(ctx, s, reader, reqs[0])
					if !sameBulk(engine.BulkResult{Result: one, Err: err}, want[0]) {
						t.Fatalf("seed %d revision %d engine %d: Check %v: %+v %v, off %+v", seed, rev, i, reqs[0], one, err, want[0])
					}
				}
				ref := &reference{s: s, rels: is.snaps[rev], subject: subj, ctx: reqCtx, now: now}
				for j, req := range reqs {
					w := ref.check(req.Resource.Type, perm, req.Resource.ID, 12)
					if w.st == refErr || want[j].Err != nil {
						continue
					}
					if int(want[j].Result.Membership) != int(w.st) || !slices.Equal(want[j].Result.Missing, w.missing) {
						t.Fatalf("seed %d revision %d: %v: engine %+v, reference %v", seed, rev, req, want[j], w)
					}
				}
			}
		}
		<-h.writing
		if st := is.x.Stats(); st.Off {
			turnedOff++
		}
		if st := is.x.Stats(); st.Answers > 0 {
			indexed++
			answered += st.Answers
		}
		is.stop()
	}
	if indexed < schemas/3 {
		t.Fatalf("the index answered in only %d of %d schemas; the generator needs more nested sets", indexed, schemas)
	}
	t.Logf("the index answered %d reads in %d schemas; %d indexes turned themselves off", answered, indexed, turnedOff)
}

// sameBulk reports whether two answers are the same, errors compared by their text.
func sameBulk(a, b engine.BulkResult) bool {
	if (a.Err == nil) != (b.Err == nil) {
		return false
	}
	if a.Err != nil {
		return a.Err.Error() == b.Err.Error()
	}
	return a.Result.Membership == b.Result.Membership && slices.Equal(a.Result.Missing, b.Result.Missing)
}

// TestLookupsAgreeWithIndex holds LookupResources (unordered, and ordered a page at a
// time) and LookupSubjects with a materialized index to the same lookups without one,
// result for result in order, errors included, and the granted resources to the
// reference evaluator, on the random histories of TestChecksAgreeWithIndex. Half the
// schemas have caveats and expiration (a lookup through a set they touch is evaluated),
// half do not (the index answers the sets' walks back whole).
func TestLookupsAgreeWithIndex(t *testing.T) {
	const schemas, lookups = 100, 6
	ctx := context.Background()
	indexed, indexedSubjects := 0, 0
	var answered, descents int64
	for seed := range uint64(schemas) {
		opts := enginetest.Options{}
		if seed%2 == 0 {
			opts = enginetest.AllTraits
		}
		h := newHistory(t, seed, opts)
		if h == nil {
			continue
		}
		g, s, is := h.g, h.s, h.is
		off := engine.New(engine.Config{MaxDepth: 12})
		x := &setsCounter{SetIndex: is.x}
		on := engine.New(engine.Config{MaxDepth: 12, Index: x})
		onCached := engine.New(engine.Config{MaxDepth: 12, Index: x, Cache: cache.New(1 << 16)})
		for _, rev := range is.revs {
			reader, err := is.st.Reader(ctx, rev)
			if err != nil {
				t.Fatal(err)
			}
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d revision %d: %s\nschema:\n%s\nrels:\n%s", seed, rev, fmt.Sprintf(format, args...), h.src, enginetest.Dump(is.snaps[rev]))
			}
			for range lookups {
				d := g.Pick(g.Defs[1:])
				perm := g.Pick(g.Names(d))
				subj := rel.SubjectRef{Object: g.Object("user")}
				if g.Rnd.IntN(4) == 0 {
					subj = g.SubjectSet()
				}
				req := engine.LookupResourcesRequest{ResourceType: d, Permission: perm, Subject: subj, Context: g.Context()}
				want := lookupResources(ctx, off, s, reader, req, -1)
				// Ordered, from a cursor in the middle, and cut short after a page.
				ordered := req
				ordered.Ordered = true
				if len(want.found) > 0 {
					ordered.After = want.found[g.Rnd.IntN(len(want.found))].ID
				}
				wantOrdered := lookupResources(ctx, off, s, reader, ordered, 2)
				for i, e := range []*engine.Engine{on, onCached} {
					if got := lookupResources(ctx, e, s, reader, req, -1); !slices.Equal(got.lines(), want.lines()) {
						fail("engine %d: LookupResources %s#%s@%v: index on %v, off %v", i, d, perm, subj, got.lines(), want.lines())
					}
					if got := lookupResources(ctx, e, s, reader, ordered, 2); !slices.Equal(got.lines(), wantOrdered.lines()) {
						fail("engine %d: ordered LookupResources %s#%s@%v after %q: index on %v, off %v", i, d, perm, subj, ordered.After, got.lines(), wantOrdered.lines())
					}
				}
				if want.err == "" {
					listed := map[string]engine.Result{}
					for _, f := range want.found {
						listed[f.ID] = f.Result
					}
					ref := &reference{s: s, rels: is.snaps[rev], subject: subj, ctx: req.Context, now: h.now}
					for _, id := range enginetest.IDs(d) {
						w := ref.check(d, perm, id, 12)
						if w.st == refErr || w.st == refCavErr {
							continue
						}
						if got, ok := listed[id]; (w.st == refHas) != (ok && got.Membership == engine.HasPermission) {
							fail("LookupResources %s#%s@%v: %s listed %v (%v), reference %v", d, perm, subj, id, ok, got, w)
						}
					}
				}
				st := subjectTypes(g)[g.Rnd.IntN(len(subjectTypes(g)))]
				lreq := engine.LookupSubjectsRequest{
					Resource: g.Object(d), Permission: perm, SubjectType: st.Object.Type, SubjectRelation: st.Relation, Context: req.Context,
				}
				wantSubjects := lookupSubjectLines(ctx, off, s, reader, lreq)
				for i, e := range []*engine.Engine{on, onCached} {
					if got := lookupSubjectLines(ctx, e, s, reader, lreq); !slices.Equal(got, wantSubjects) {
						fail("engine %d: LookupSubjects %v#%s@%v: index on %v, off %v", i, lreq.Resource, perm, st, got, wantSubjects)
					}
				}
			}
		}
		<-h.writing
		if x.answered.Load() > 0 {
			indexed++
			answered += x.answered.Load()
		}
		if x.descents.Load() > 0 {
			indexedSubjects++
			descents += x.descents.Load()
		}
		is.stop()
	}
	if indexed < schemas/5 || indexedSubjects < schemas/5 {
		t.Fatalf("the index answered LookupResources in only %d of %d schemas, LookupSubjects in %d; the generator needs more nested sets", indexed, schemas, indexedSubjects)
	}
	t.Logf("the index answered %d walks back of LookupResources in %d schemas, %d walks down nested sets of LookupSubjects in %d", answered, indexed, descents, indexedSubjects)
}

// setsCounter counts the lookups' walks through nested sets an index answered.
type setsCounter struct {
	engine.SetIndex
	answered, descents atomic.Int64
}

func (c *setsCounter) Descendants(ctx context.Context, rev store.Revision, r *ir.Relation, id string) ([]string, int, bool, bool) {
	ids, longest, cyclic, known := c.SetIndex.Descendants(ctx, rev, r, id)
	if known {
		c.descents.Add(1)
	}
	return ids, longest, cyclic, known
}

func (c *setsCounter) Sets(ctx context.Context, rev store.Revision, subject rel.SubjectRef, r *ir.Relation) ([]string, []uint8, bool) {
	ids, hops, known := c.SetIndex.Sets(ctx, rev, subject, r)
	if known {
		c.answered.Add(1)
	}
	return ids, hops, known
}

// foundResources is what a LookupResources yielded, in order, and how it ended.
type foundResources struct {
	found []engine.FoundResource
	err   string
}

func (f foundResources) lines() []string {
	var out []string
	for _, r := range f.found {
		out = append(out, fmt.Sprintf("%s %v %v", r.ID, r.Result.Membership, r.Result.Missing))
	}
	return append(out, "end: "+f.err)
}

// errEnough stops a lookup after the results a test wanted.
var errEnough = errors.New("enough")

// lookupResources runs req on e, taking at most limit results (all when negative).
func lookupResources(ctx context.Context, e *engine.Engine, s *ir.Schema, r store.Reader, req engine.LookupResourcesRequest, limit int) foundResources {
	var out foundResources
	err := e.LookupResources(ctx, s, r, req, func(f engine.FoundResource) error {
		if len(out.found) == limit {
			return errEnough
		}
		out.found = append(out.found, f)
		return nil
	})
	if err != nil {
		out.err = err.Error()
	}
	return out
}

// lookupSubjectLines runs req on e and writes out what it yielded, in order, and how
// it ended.
func lookupSubjectLines(ctx context.Context, e *engine.Engine, s *ir.Schema, r store.Reader, req engine.LookupSubjectsRequest) []string {
	var out []string
	err := e.LookupSubjects(ctx, s, r, req, func(f engine.FoundSubject) error {
		out = append(out, fmt.Sprintf("%s %v %v excluding %+v", f.ID, f.Result.Membership, f.Result.Missing, f.Excluded))
		return nil
	})
	return append(out, fmt.Sprintf("end: %v", err))
}

// TestLookupThroughLongChainsAgreesWithIndex: LookupResources and LookupSubjects
// through chains of nested groups about as long as the rounds of a LookupResources
// fixpoint and the depth limit yield the same results, in the same order, and fail
// with the same error, with the index on or off.
func TestLookupThroughLongChainsAgreesWithIndex(t *testing.T) {
	ctx := context.Background()
	s, err := schema.Compile(`definition user {}
definition group { relation member: user | group#member }
definition doc {
	relation viewer: group#member
	permission view = viewer
}`)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[bool]int{} // lookups that failed at the depth limit, and the others
	for _, n := range []int{engine.DefaultMaxDepth - 2, engine.DefaultMaxDepth - 1, engine.DefaultMaxDepth, engine.DefaultMaxDepth + 1} {
		// g0 holds u0; g(i+1) holds gi; g3 holds g1 too (a shortcut) and
		// g(n/2) holds g0 (a cycle); doc d(i) is viewed by gi.
		lines := []string{"group:g0#member@user:u0", "group:g3#member@group:g1#member"}
		for i := range n {
			lines = append(lines, fmt.Sprintf("group:g%d#member@group:g%d#member", i+1, i), fmt.Sprintf("doc:d%d#viewer@group:g%d#member", i, i))
		}
		if n%2 == 1 {
			lines = append(lines, fmt.Sprintf("group:g0#member@group:g%d#member", n/2))
		}
		is := newIndexedStore(t, s, parseRels(t, lines...), materialize.Config{Retain: time.Hour})
		x, off, on, reader := is.engines(0)
		for _, subj := range []string{"user:u0", "user:u1", "group:g1#member"} {
			sub, err := rel.ParseSubject(subj)
			if err != nil {
				t.Fatal(err)
			}
			for _, req := range []engine.LookupResourcesRequest{
				{ResourceType: "group", Permission: "member", Subject: sub},
				{ResourceType: "group", Permission: "member", Subject: sub, Ordered: true, After: "g2"},
				{ResourceType: "doc", Permission: "view", Subject: sub},
			} {
				want := lookupResources(ctx, off, s, reader, req, -1)
				if got := lookupResources(ctx, on, s, reader, req, -1); !slices.Equal(got.lines(), want.lines()) {
					t.Fatalf("chain of %d, %v: index on %v, off %v", n, req, got.lines(), want.lines())
				}
				outcomes[want.err == engine.ErrMaxDepth.Error()]++
			}
		}
		for _, top := range []string{fmt.Sprint("g", n), fmt.Sprint("g", n/2), "g3"} {
			for _, st := range []rel.SubjectRef{{Object: rel.ObjectRef{Type: "user"}}, {Object: rel.ObjectRef{Type: "group"}, Relation: "member"}} {
				req := engine.LookupSubjectsRequest{Resource: rel.ObjectRef{Type: "group", ID: top}, Permission: "member", SubjectType: st.Object.Type, SubjectRelation: st.Relation}
				want := lookupSubjectLines(ctx, off, s, reader, req)
				if got := lookupSubjectLines(ctx, on, s, reader, req); !slices.Equal(got, want) {
					t.Fatalf("chain of %d, LookupSubjects %v: index on %v, off %v", n, req, got, want)
				}
				outcomes[strings.HasSuffix(want[len(want)-1], engine.ErrMaxDepth.Error())]++
			}
		}
		if x.answered.Load() == 0 || x.descents.Load() == 0 {
			t.Fatalf("chain of %d: the index answered no lookup", n)
		}
		is.stop()
	}
	if outcomes[true] == 0 || outcomes[false] == 0 {
		t.Fatalf("lookups failing at the depth limit, and not: %v; the chains need other lengths", outcomes)
	}
}

// TestChecksThroughChainsAgreeWithIndex checks folders nested in folders (a chain
// arrow, `view = viewer + parent->view`) through the index's chains: a permission
// reached up a chain of every length around the depth limit, a chain with a cycle and
// one with a caveated link (both evaluated instead), and subjects the chain reaches
// through groups, directly or not at all. The answers and errors are the same with the
// index on or off, and with it on, a check up a long chain takes a few subproblems
// rather than one per folder; a lookup takes the user's groups from the index, the
// caveated link notwithstanding.
func TestChecksThroughChainsAgreeWithIndex(t *testing.T) {
	ctx := context.Background()
	s, err := schema.Compile(`definition user {}
caveat flagged(f bool) { f }
definition group { relation member: user | group#member }
definition folder {
	relation parent: folder | folder with flagged
	relation viewer: user | group#member
	permission view = viewer + parent->view
}
definition document {
	relation parent: folder
	permission view = parent->view
}`)
	if err != nil {
		t.Fatal(err)
	}
	const depth = 12
	for _, caveated := range []bool{false, true} {
		// f0 is viewed by u0 and by group g1, which holds g0, which holds u1;
		// f(i+1) sits in fi; c0 and c1 sit in each other; document d(i) in fi.
		lines := []string{
			"folder:f0#viewer@user:u0", "folder:f0#viewer@group:g1#member",
			"group:g1#member@group:g0#member", "group:g0#member@user:u1",
			"folder:c0#parent@folder:c1", "folder:c1#parent@folder:c0", "folder:c1#viewer@user:u0",
		}
		for i := range depth + 2 {
			lines = append(lines, fmt.Sprintf("folder:f%d#parent@folder:f%d", i+1, i), fmt.Sprintf("document:d%d#parent@folder:f%d", i, i))
		}
		if caveated {
			lines = append(lines, "folder:f3#parent@folder:c0[flagged]")
		}
		is := newIndexedStore(t, s, parseRels(t, lines...), materialize.Config{Retain: time.Hour})
		x, off, on, reader := is.engines(depth)
		fewer := 0
		for _, subj := range []string{"user:u0", "user:u1", "user:u2", "group:g0#member"} {
			sub, err := rel.ParseSubject(subj)
			if err != nil {
				t.Fatal(err)
			}
			res := []string{"folder:c0", "folder:c1"}
			for i := range depth + 2 {
				res = append(res, fmt.Sprintf("folder:f%d", i), fmt.Sprintf("document:d%d", i))
			}
			for _, r := range res {
				obj, err := rel.ParseObject(r)
				if err != nil {
					t.Fatal(err)
				}
				req := engine.CheckRequest{Resource: obj, Permission: "view", Subject: sub, Context: map[string]any{"f": true}}
				var offStats, onStats engine.Stats
				want, wantErr := off.Check(engine.WithStats(ctx, &offStats), s, reader, req)
				got, gotErr := on.Check(engine.WithStats(ctx, &onStats), s, reader, req)
				if !sameBulk(engine.BulkResult{Result: got, Err: gotErr}, engine.BulkResult{Result: want, Err: wantErr}) {
					t.Fatalf("caveated %v: %s view %s: index on %+v %v, off %+v %v", caveated, r, subj, got, gotErr, want, wantErr)
				}
				if onStats.Dispatched.Load()*2 < offStats.Dispatched.Load() {
					fewer++
				}
			}
		}
		// A caveated link of a chain leaves the index's nested groups whole: a lookup
		// still takes the user's groups from it.
		for _, subj := range []string{"user:u0", "user:u1"} {
			sub, err := rel.ParseSubject(subj)
			if err != nil {
				t.Fatal(err)
			}
			req := engine.LookupResourcesRequest{ResourceType: "document", Permission: "view", Subject: sub, Context: map[string]any{"f": true}}
			want := lookupResources(ctx, off, s, reader, req, -1)
			if got := lookupResources(ctx, on, s, reader, req, -1); !slices.Equal(got.lines(), want.lines()) || got.err != want.err {
				t.Fatalf("caveated %v: %v: index on %v %s, off %v %s", caveated, req, got.lines(), got.err, want.lines(), want.err)
			}
		}
		if x.descents.Load() == 0 || fewer == 0 || x.answered.Load() == 0 {
			t.Fatalf("caveated %v: the index answered no chain or no lookup (%d descents, %d checks with fewer subproblems, %d lookups)",
				caveated, x.descents.Load(), fewer, x.answered.Load())
		}
		is.stop()
	}
}

// TestLookupsTakeGroupsBesideCaveats: a caveated or expiring group membership turns off
// the index's answer to a lookup's walk back only for the subjects whose walk crosses
// it: u0's groups hold plainly and come from the index, while u1's own membership is
// caveated and u2's group sits in another by an expiring membership; a subject set
// the index does not hold (a team in an org) turns it off for every subject. The results are the same
// with the index on or off.
func TestLookupsTakeGroupsBesideCaveats(t *testing.T) {
	ctx := context.Background()
	s, err := schema.Compile(`use expiration
definition user {}
caveat flagged(f bool) { f }
definition team { relation member: user }
definition group { relation member: user | user with flagged | group#member | group#member with expiration }
definition org { relation member: org#member | team#member }
definition doc {
	relation viewer: group#member
	permission view = viewer
}`)
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		"group:g0#member@user:u0", "group:g1#member@group:g0#member",
		"group:g2#member@user:u1[flagged]", "group:g3#member@group:g2#member",
		"group:g4#member@user:u2", "group:g5#member@group:g4#member[expiration:2300-01-01T00:00:00Z]",
	}
	for i := range 6 {
		lines = append(lines, fmt.Sprintf("doc:d%d#viewer@group:g%d#member", i, i))
	}
	for _, opaque := range []bool{false, true} {
		rels := lines
		if opaque {
			rels = append(slices.Clone(lines), "org:o0#member@team:t0#member", "team:t0#member@user:u3")
		}
		is := newIndexedStore(t, s, parseRels(t, rels...), materialize.Config{Retain: time.Hour})
		x, off, on, reader := is.engines(0)
		for _, subj := range []string{"user:u0", "user:u1", "user:u2"} {
			sub, err := rel.ParseSubject(subj)
			if err != nil {
				t.Fatal(err)
			}
			before := x.answered.Load()
			req := engine.LookupResourcesRequest{ResourceType: "doc", Permission: "view", Subject: sub, Context: map[string]any{"f": true}}
			want := lookupResources(ctx, off, s, reader, req, -1)
			got := lookupResources(ctx, on, s, reader, req, -1)
			if !slices.Equal(got.lines(), want.lines()) {
				t.Fatalf("%s: index on %v, off %v", subj, got.lines(), want.lines())
			}
			if len(want.found) == 0 {
				t.Fatalf("%s: found nothing; the data should grant some", subj)
			}
			if answered, wantAnswered := x.answered.Load() > before, subj == "user:u0" && !opaque; answered != wantAnswered {
				t.Fatalf("opaque %v, %s: the index answered the walk back %v, want %v", opaque, subj, answered, wantAnswered)
			}
		}
		is.stop()
	}
}
