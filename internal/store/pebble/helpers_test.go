package pebble

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// clock is a settable time source for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// setVar sets a package tunable for the rest of the test. Call it before opening
// stores, so that they close (cleanups run last-in first-out) before it is restored.
func setVar[T any](t testing.TB, p *T, v T) {
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

func relationship(resType, id, relation, subjType, subjID, subjRel string) rel.Relationship {
	return rel.Relationship{
		Resource: rel.ObjectRef{Type: resType, ID: id}, Relation: relation,
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: subjType, ID: subjID}, Relation: subjRel},
	}
}

func keyString(k rel.Key) string {
	s := k.ResourceType + ":" + k.ResourceID + "#" + k.Relation + "@" + k.SubjectType + ":" + k.SubjectID
	if k.SubjectRelation != "" {
		s += "#" + k.SubjectRelation
	}
	return s
}

func mustWrite(t testing.TB, s store.Store, op store.Op, rs ...rel.Relationship) store.Revision {
	t.Helper()
	us := make([]store.Update, len(rs))
	for i, r := range rs {
		us[i] = store.Update{Op: op, Relationship: r}
	}
	rev, err := s.Write(context.Background(), nil, us, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// readAll returns the relationships matching f at rev.
func readAll(t testing.TB, s store.Store, rev store.Revision, f store.Filter) []rel.Relationship {
	t.Helper()
	r, err := s.Reader(context.Background(), rev)
	if err != nil {
		t.Fatalf("reader at %d: %v", rev, err)
	}
	var out []rel.Relationship
	for item, err := range r.Query(context.Background(), f, store.QueryOptions{}) {
		if err != nil {
			t.Fatalf("query %s at %d: %v", f, rev, err)
		}
		out = append(out, item.Relationship)
	}
	return out
}

func keysOf(rs []rel.Relationship) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = keyString(r.Key())
	}
	return out
}

func expectKeys(t testing.TB, s store.Store, rev store.Revision, f store.Filter, want ...string) {
	t.Helper()
	got := keysOf(readAll(t, s, rev, f))
	if !slices.Equal(got, want) && len(got)+len(want) > 0 {
		t.Fatalf("query %s at %d:\n got  %q\n want %q", f, rev, got, want)
	}
}

// countKeys counts the raw keys with the given tag byte.
func countKeys(t testing.TB, s *Store, tag byte) int {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tag}, UpperBound: []byte{tag + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	return n
}

// generated yields n distinct relationships in no particular key order: four viewers
// on each document, documents named by a bijective hash of their number.
func generated(n int) iter.Seq2[rel.Relationship, error] {
	return func(yield func(rel.Relationship, error) bool) {
		for i := range n {
			doc := fmt.Sprintf("doc-%08x", mix32(uint32(i/4)))
			user := fmt.Sprintf("user-%d", (i*7919)%100000)
			if !yield(relationship("document", doc, "viewer", "user", user, ""), nil) {
				return
			}
		}
	}
}

// mix32 is a bijection on uint32 that scatters consecutive numbers.
func mix32(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x7feb352d
	x ^= x >> 15
	x *= 0x846ca68b
	return x ^ x>>16
}
