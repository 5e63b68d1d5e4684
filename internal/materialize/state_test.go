package materialize

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine/enginetest"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// dump writes out everything st holds at rev, by name, leaving out what is empty.
func dump(st *state, rev store.Revision) map[string]string {
	out := map[string]string{}
	names := func(ids []uint32) []string {
		var s []string
		for _, id := range ids {
			s = append(s, string(st.names.name(id)))
		}
		slices.Sort(s)
		return s
	}
	if t, ok := st.tainted.at(rev); !ok {
		out["(tainted)"] = "unknown"
	} else if t != nil {
		out["(tainted)"] = fmt.Sprintf("opaque %v below %v", t.opaque, names(t.subjects))
	}
	for id := range uint32(st.names.len()) {
		ps, ok1 := st.node(id).parents.at(rev)
		var anc []uint64
		var sum summary
		var cs []uint32
		ok2, ok3, ok4 := true, true, true
		if sn := st.setOf(id); sn != nil {
			anc, ok2 = sn.anc.at(rev)
			sum, ok3 = sn.sum.at(rev)
			cs, ok4 = sn.children.at(rev)
		}
		if !ok1 || !ok2 || !ok3 || !ok4 {
			out[string(st.names.name(id))] = "unknown"
			continue
		}
		var a []string
		for _, e := range anc {
			a = append(a, fmt.Sprintf("%s/%d", st.names.name(uint32(e>>8)), uint8(e)))
		}
		slices.Sort(a)
		if len(ps) == 0 && len(a) == 0 && len(cs) == 0 && sum == (summary{}) {
			continue
		}
		out[string(st.names.name(id))] = fmt.Sprintf("parents %v ancestors %v children %v height %d taint %d", names(ps), a, names(cs), sum.height, sum.taint)
	}
	return out
}

// TestReplayEqualsBuild: the index built at a revision (of nested sets, and chains for
// half the schemas) and then fed a random history of writes holds, at every revision of that history (through its version chains),
// exactly what an index built from scratch at that revision holds.
func TestReplayEqualsBuild(t *testing.T) {
	ctx := context.Background()
	tested := 0
	for seed := range uint64(120) {
		opts := enginetest.AllTraits
		opts.Nested, opts.Chains = true, seed%2 == 0
		g := enginetest.New(rand.New(rand.NewPCG(seed, 5)), opts)
		s, err := schema.Compile(g.Schema())
		if err != nil {
			continue
		}
		p := planFor(s)
		if p.empty() {
			continue
		}
		tested++
		now := time.Now()
		ms := memory.New(memory.Options{GCInterval: -1})
		live := map[rel.Key]rel.Relationship{}
		write := func(touch []rel.Relationship, delFrac int) store.Revision {
			var updates []store.Update
			for _, k := range slices.SortedFunc(maps.Keys(live), func(a, b rel.Key) int { return store.CompareKeys(a, b) }) {
				if g.Rnd.IntN(delFrac) == 0 {
					updates = append(updates, store.Update{Op: store.Delete, Relationship: live[k]})
					delete(live, k)
				}
			}
			for _, x := range touch {
				if _, gone := live[x.Key()]; !gone && slices.ContainsFunc(updates, func(u store.Update) bool { return u.Relationship.Key() == x.Key() }) {
					continue
				}
				updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
				live[x.Key()] = x
			}
			rev, err := ms.Write(ctx, nil, updates, nil)
			if err != nil {
				t.Fatal(err)
			}
			return rev
		}
		rev0 := write(g.Relationships(10+g.Rnd.IntN(40), now), 1<<30)
		x := New(Config{Store: ms, SchemaAt: nil, Retain: time.Hour})
		st, err := x.build(ctx, p, rev0)
		if err != nil {
			t.Fatal(err)
		}
		revs := []store.Revision{rev0}
		for range 8 {
			revs = append(revs, write(g.Relationships(1+g.Rnd.IntN(8), now), 5))
		}
		next, stop := iter.Pull2(ms.Watch(ctx, rev0, store.WatchOptions{}))
		for st.applied.Load() < uint64(revs[len(revs)-1]) {
			ch, err, ok := next()
			if !ok || err != nil {
				t.Fatalf("watch: %v", err)
			}
			if err := st.apply(ch); err != nil {
				t.Fatal(err)
			}
		}
		stop()
		for _, rev := range revs {
			fresh, err := x.build(ctx, p, rev)
			if err != nil {
				t.Fatal(err)
			}
			got, want := dump(st, rev), dump(fresh, rev)
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d revision %d: replayed index differs from one built there:\nreplayed:\n%s\nbuilt:\n%s", seed, rev, lines(got), lines(want))
			}
		}
		ms.Close()
	}
	if tested < 60 {
		t.Fatalf("only %d schemas had nested sets", tested)
	}
}

func lines(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "  %s: %s\n", k, m[k])
	}
	return b.String()
}

// TestBuildStoppedFails: a build whose context ends while it reads the store fails
// with the context's error, never with an index of what it read before.
func TestBuildStoppedFails(t *testing.T) {
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	ms, rev, _ := nestedGroups(t, 3, 4, 3, 20000)
	defer ms.Close()
	ctx, cancel := context.WithCancel(context.Background())
	x := New(Config{Store: &stoppingStore{Store: ms, after: 5000, stop: cancel}, Retain: time.Hour})
	if st, err := x.build(ctx, planFor(s), rev); err == nil || st != nil {
		t.Fatalf("a build whose context ended returned %v, %v", st, err)
	}
	st, err := x.build(context.Background(), planFor(s), rev)
	if err != nil || st.entries.Load() == 0 {
		t.Fatalf("build: %v, %d entries", err, st.entries.Load())
	}
}

// stoppingStore calls stop once its readers have yielded after relationships.
type stoppingStore struct {
	store.Store
	after int
	stop  func()
}

func (s *stoppingStore) Reader(ctx context.Context, rev store.Revision) (store.Reader, error) {
	r, err := s.Store.Reader(ctx, rev)
	return &stoppingReader{Reader: r, s: s}, err
}

type stoppingReader struct {
	store.Reader
	s *stoppingStore
}

func (r *stoppingReader) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	return func(yield func(store.Item, error) bool) {
		for item, err := range r.Reader.Query(ctx, f, opts) {
			if r.s.after--; r.s.after == 0 {
				r.s.stop()
			}
			if !yield(item, err) {
				return
			}
		}
	}
}
