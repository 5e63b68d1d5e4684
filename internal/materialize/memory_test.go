package materialize

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

const nestedSchema = `definition user {}

definition group {
	relation member: user | group#member
}

definition document {
	relation viewer: user | group#member
	permission view = viewer
}
`

// nestedGroups writes an organisation of nested groups to a new memory store: levels
// levels of groups, each level paretoFanout times the one above on average (a Pareto
// draw per group), each group below the top in one to three groups of the level
// above, and users mostly in the deepest groups. It returns the store, the head, and
// the groups by level.
func nestedGroups(tb testing.TB, seed uint64, levels, top, users int) (*memory.Store, store.Revision, [][]string) {
	tb.Helper()
	rnd := rand.New(rand.NewPCG(seed, 1))
	pareto := func() int { return int(math.Min(1/math.Pow(1-rnd.Float64(), 1/1.5), 20)) }
	var rels []rel.Relationship
	member := func(g string, subject rel.SubjectRef) {
		rels = append(rels, rel.Relationship{Resource: rel.ObjectRef{Type: "group", ID: g}, Relation: "member", Subject: subject})
	}
	byLevel := [][]string{}
	for l := range levels {
		var level []string
		if l == 0 {
			for i := range top {
				level = append(level, fmt.Sprintf("l0g%d", i))
			}
		} else {
			for _, parent := range byLevel[l-1] {
				for range pareto() {
					g := fmt.Sprintf("l%dg%d", l, len(level))
					level = append(level, g)
					member(parent, rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: g}, Relation: "member"})
					if rnd.IntN(3) == 0 {
						other := byLevel[l-1][rnd.IntN(len(byLevel[l-1]))]
						if other != parent {
							member(other, rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: g}, Relation: "member"})
						}
					}
				}
			}
		}
		byLevel = append(byLevel, level)
	}
	for u := range users {
		l := levels - 1
		if rnd.IntN(5) == 0 {
			l = rnd.IntN(levels)
		}
		level := byLevel[l]
		member(level[rnd.IntN(len(level))], rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprintf("u%d", u)}})
	}
	st := memory.New(memory.Options{GCInterval: -1})
	seen := map[rel.Key]bool{}
	var updates []store.Update
	for _, x := range rels {
		if !seen[x.Key()] {
			seen[x.Key()] = true
			updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
		}
	}
	rev, err := st.Write(context.Background(), nil, updates, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return st, rev, byLevel
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestBytesMatchHeap holds the memory the index reports against the heap it grows
// (runtime.MemStats), within 5%, and reports the bytes per entry.
func TestBytesMatchHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a data set of 100,000 relationships")
	}
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	ms, rev, _ := nestedGroups(t, 1, 8, 20, 60000)
	defer ms.Close()
	x := New(Config{Store: ms, Retain: time.Hour})
	before := heapAlloc()
	st, err := x.build(context.Background(), planFor(s), rev)
	if err != nil {
		t.Fatal(err)
	}
	grown := float64(heapAlloc() - before)
	reported := float64(st.bytes.Load())
	runtime.KeepAlive(st)
	t.Logf("nodes %d, entries %d, %d bytes reported, %.0f grown: %.1f bytes per entry", st.names.len(), st.entries.Load(), int64(reported), grown, reported/float64(st.entries.Load()))
	if math.Abs(reported-grown) > 0.05*grown {
		t.Fatalf("the index reports %d bytes; the heap grew by %.0f", int64(reported), grown)
	}
}

// TestSizeClass holds sizeClass's table against the classes searched one by one.
func TestSizeClass(t *testing.T) {
	for n := int64(1); n <= 3*sizeClassesMax; n++ {
		want := (n + 8191) / 8192 * 8192
		for _, c := range sizeClasses {
			if c >= n {
				want = c
				break
			}
		}
		if got := sizeClass(n); got != want {
			t.Fatalf("sizeClass(%d) = %d, want %d", n, got, want)
		}
	}
	if got := sizeClass(0); got != 0 {
		t.Fatalf("sizeClass(0) = %d, want 0", got)
	}
}
