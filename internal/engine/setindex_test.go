package engine_test

import (
	"context"
	"math/rand/v2"
	"slices"
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

// TestChecksAgreeWithIndex holds the engine with a materialized index (with and
// without the cache) to the engine without one and to the reference evaluator, on
// random schemas with nested subject sets, cycles, arrows, exclusions, intersections,
// caveats, expiration and wildcards, at every revision of a history of writes, while
// more writes go on: the answers, errors included, are the same with the index on or
// off. A third of the indexes keep only the newest revision (older reads fall back and
// their versions are pruned under the readers), a third have too little memory to hold
// every set (some are dropped, or the index turns itself off).
func TestChecksAgreeWithIndex(t *testing.T) {
	const schemas, writes, checks = 100, 6, 12
	ctx := context.Background()
	indexed, turnedOff := 0, 0
	var answered int64
	for seed := range uint64(schemas) {
		opts := enginetest.AllTraits
		opts.Nested = true
		g := enginetest.New(rand.New(rand.NewPCG(seed, 33)), opts)
		src := g.Schema()
		s, err := schema.Compile(src)
		if err != nil {
			continue
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
		// Writes go on while the checks read the revisions before them, so that the
		// index applies, publishes and prunes under the readers.
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
				if _, err := is.st.Write(ctx, nil, updates, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
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
		<-writing
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
