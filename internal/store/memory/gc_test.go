package memory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// clock is a settable time source for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

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

func newTestStore(t *testing.T, window time.Duration) (*Store, *clock) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := New(Options{GCWindow: window, GCInterval: -1, Now: c.Now})
	t.Cleanup(func() { _ = s.Close() })
	return s, c
}

func relationship(res, id, relation, subjType, subjID, subjRel string) rel.Relationship {
	return rel.Relationship{
		Resource: rel.ObjectRef{Type: res, ID: id}, Relation: relation,
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: subjType, ID: subjID}, Relation: subjRel},
	}
}

func mustWrite(t *testing.T, s *Store, op store.Op, rs ...rel.Relationship) store.Revision {
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

func readAll(t *testing.T, s *Store, rev store.Revision, f store.Filter) []rel.Key {
	t.Helper()
	return readKeys(t, s, rev, f, store.QueryOptions{})
}

// readKeys is the keys of the relationships a query of f with opts at rev yields.
func readKeys(t *testing.T, s *Store, rev store.Revision, f store.Filter, opts store.QueryOptions) []rel.Key {
	t.Helper()
	r, err := s.Reader(context.Background(), rev)
	if err != nil {
		t.Fatalf("reader at %d: %v", rev, err)
	}
	var out []rel.Key
	for item, err := range r.Query(context.Background(), f, opts) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, item.Relationship.Key())
	}
	return out
}

func TestRevisionRetention(t *testing.T) {
	ctx := context.Background()
	s, c := newTestStore(t, time.Hour)
	r1, _ := s.HeadRevision(ctx)
	r2 := mustWrite(t, s, store.Create, relationship("doc", "a", "viewer", "user", "x", ""))
	c.advance(10 * time.Minute)
	r3 := mustWrite(t, s, store.Delete, relationship("doc", "a", "viewer", "user", "x", ""))
	c.advance(2 * time.Hour)
	r4 := mustWrite(t, s, store.Create, relationship("doc", "b", "viewer", "user", "y", ""))
	c.advance(time.Minute)

	// r1 and r2 were superseded more than an hour ago; r3 was superseded a minute ago.
	for _, rev := range []store.Revision{r1, r2} {
		if _, err := s.Reader(ctx, rev); !errors.Is(err, store.ErrRevisionGone) {
			t.Fatalf("reader at %d before GC: %v, want ErrRevisionGone", rev, err)
		}
	}
	if got := s.GC(c.Now()); got != 1 {
		t.Fatalf("GC freed %d records, want the one deleted at %d", got, r3)
	}
	checkInvariants(t, s)
	if st := s.Stats(); st.Oldest != r3 || st.Records != 1 || st.Live != 1 {
		t.Fatalf("after GC: %+v, want oldest %d, 1 record, 1 live", st, r3)
	}
	if got := readAll(t, s, r3, store.Filter{}); len(got) != 0 {
		t.Fatalf("at %d read %v, want nothing", r3, got)
	}
	// The head stays readable however old it is.
	c.advance(48 * time.Hour)
	s.GC(c.Now())
	if got := readAll(t, s, r4, store.Filter{}); len(got) != 1 {
		t.Fatalf("old head read %v, want one relationship", got)
	}
	if _, err := s.Reader(ctx, r3); !errors.Is(err, store.ErrRevisionGone) {
		t.Fatalf("reader at %d: %v, want ErrRevisionGone", r3, err)
	}
}

func TestSchemaHistoryCollected(t *testing.T) {
	ctx := context.Background()
	s, c := newTestStore(t, time.Hour)
	s1, _ := s.WriteSchema(ctx, "one", nil)
	c.advance(time.Minute)
	s2, _ := s.WriteSchema(ctx, "two", nil)
	c.advance(2 * time.Hour)
	r := mustWrite(t, s, store.Create, relationship("doc", "a", "viewer", "user", "x", ""))
	c.advance(2 * time.Hour)
	s.GC(c.Now())
	if _, err := s.Reader(ctx, s1); !errors.Is(err, store.ErrRevisionGone) {
		t.Fatalf("reader at %d: %v, want ErrRevisionGone", s1, err)
	}
	rd, err := s.Reader(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if text, err := rd.Schema(ctx); err != nil || text != "two" {
		t.Fatalf("schema at %d after GC: %q, %v; want two (written at %d)", r, text, err, s2)
	}
	if len(s.schemas) != 1 {
		t.Fatalf("GC kept %d schema versions, want 1", len(s.schemas))
	}
}

func TestGCReusesSlotsAndSymbols(t *testing.T) {
	s, c := newTestStore(t, time.Minute)
	var rs []rel.Relationship
	for i := range 3000 {
		rs = append(rs, relationship("doc", fmt.Sprint("d", i), "viewer", "user", fmt.Sprint("u", i), ""))
	}
	mustWrite(t, s, store.Create, rs...)
	before := s.Stats()
	mustWrite(t, s, store.Delete, rs...)
	c.advance(2 * time.Minute)
	mustWrite(t, s, store.Create, relationship("doc", "keep", "viewer", "user", "k", ""))
	c.advance(2 * time.Minute)
	if got := s.GC(c.Now()); got != len(rs) {
		t.Fatalf("GC freed %d records, want %d", got, len(rs))
	}
	checkInvariants(t, s)
	after := s.Stats()
	if after.Records != 1 || after.Symbols > 7 {
		t.Fatalf("after GC: %+v; want 1 record and the symbols of one relationship", after)
	}
	slots := s.recs.len()
	mustWrite(t, s, store.Create, rs[:1000]...)
	if s.recs.len() != slots {
		t.Fatalf("writing after GC grew the record slice from %d to %d instead of reusing slots", slots, s.recs.len())
	}
	checkInvariants(t, s)
	if got := readAll(t, s, store.Revision(s.head), store.Filter{ResourceType: "doc", ResourceIDs: []string{"d5", "keep"}}); len(got) != 2 {
		t.Fatalf("after reuse read %v", got)
	}
	_ = before
}

func TestGCFreesLongExpired(t *testing.T) {
	s, c := newTestStore(t, time.Hour)
	soon := c.Now().Add(5 * time.Minute)
	x := relationship("doc", "a", "viewer", "user", "x", "")
	x.Expiration = &soon
	rev := mustWrite(t, s, store.Create, x, relationship("doc", "a", "viewer", "user", "y", ""))
	c.advance(30 * time.Minute)
	if got := readAll(t, s, rev, store.Filter{IncludeExpired: true}); len(got) != 2 {
		t.Fatalf("expired relationship not readable with IncludeExpired before GC: %v", got)
	}
	if got := s.GC(c.Now()); got != 0 {
		t.Fatalf("GC freed %d records within the window", got)
	}
	c.advance(time.Hour)
	if got := s.GC(c.Now()); got != 1 {
		t.Fatalf("GC freed %d records, want the one expired more than the window ago", got)
	}
	checkInvariants(t, s)
	if got := readAll(t, s, rev, store.Filter{IncludeExpired: true}); len(got) != 1 {
		t.Fatalf("after GC read %v, want only the unexpiring relationship", got)
	}
	// Creating it again works and is not collected by the stale heap entry.
	mustWrite(t, s, store.Create, relationship("doc", "a", "viewer", "user", "x", ""))
	c.advance(3 * time.Hour)
	s.GC(c.Now())
	checkInvariants(t, s)
	if got := readAll(t, s, store.Revision(s.head), store.Filter{}); len(got) != 2 {
		t.Fatalf("read %v, want both relationships", got)
	}
}

// TestReaderOutlivedByRevision reads a revision that garbage collection passes while
// the caller is still consuming: the query must stop with ErrRevisionGone rather than
// return records that may have been freed.
func TestReaderOutlivedByRevision(t *testing.T) {
	ctx := context.Background()
	s, c := newTestStore(t, time.Minute)
	var rs []rel.Relationship
	for i := range 2 * batchItems {
		rs = append(rs, relationship("doc", fmt.Sprintf("d%04d", i), "viewer", "user", "u", ""))
	}
	rev := mustWrite(t, s, store.Create, rs...)
	mustWrite(t, s, store.Delete, rs...)
	r, err := s.Reader(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var gotErr error
	for _, err := range r.Query(ctx, store.Filter{}, store.QueryOptions{}) {
		if err != nil {
			gotErr = err
			break
		}
		if n++; n == 1 {
			c.advance(time.Hour)
			s.GC(c.Now())
		}
	}
	if !errors.Is(gotErr, store.ErrRevisionGone) || n != batchItems {
		t.Fatalf("read %d then %v; want %d then ErrRevisionGone", n, gotErr, batchItems)
	}
}

// TestRandomWithGC applies random writes while time passes and GC runs, and checks
// that collection never changes what a retained revision reads and that the indexes
// stay consistent.
// TestRandomWithGC writes at random, collecting now and then, and holds every retained
// revision to what it read when it was the head. Seeds 4 and up give records so few
// revision offsets that the store rebases them every few dozen writes.
func TestRandomWithGC(t *testing.T) {
	defer func(span uint64) { revisionSpan = span }(revisionSpan)
	for seed := range uint64(8) {
		if seed >= 4 {
			revisionSpan = 40
		}
		s, c := newTestStore(t, 10*time.Minute)
		if seed%2 == 1 {
			// Most keys collide in the exact index: exercise its probing past other keys and
			// dead slots.
			s.exact.weakHash = func(k exactKey) uint64 { return uint64(k.resID % 3) }
			s.in.weakHash = func(s string) uint64 { return uint64(len(s) % 2) }
		}
		rnd := rand.New(rand.NewPCG(seed, 3))
		snapshots := map[store.Revision][]rel.Relationship{}
		for step := range 300 {
			randomWrite(t, s, c, rnd)
			c.advance(time.Duration(rnd.IntN(120)) * time.Second)
			head := store.Revision(s.head)
			snapshots[head], _ = readRels(s, head)
			if rnd.IntN(10) == 0 {
				s.GC(c.Now())
				checkInvariants(t, s)
			}
			cutoff := c.Now().Add(-10 * time.Minute)
			checked := 0
			for rev, want := range snapshots { // random order: a few per step cover them all
				if checked++; checked > 4 {
					break
				}
				got, err := readRels(s, rev)
				if errors.Is(err, store.ErrRevisionGone) {
					delete(snapshots, rev)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if !collectedOnlyExpired(got, want, cutoff) {
					t.Fatalf("seed %d step %d: revision %d reads\n %v\nafter GC, was\n %v", seed, step, rev, got, want)
				}
			}
		}
		if seed >= 4 && s.revBase == 0 {
			t.Errorf("seed %d: %d writes with a span of %d never rebased", seed, s.head, revisionSpan)
		}
	}
}

func readRels(s *Store, rev store.Revision) ([]rel.Relationship, error) {
	ctx := context.Background()
	r, err := s.Reader(ctx, rev)
	if err != nil {
		return nil, err
	}
	var out []rel.Relationship
	for item, err := range r.Query(ctx, store.Filter{IncludeExpired: true}, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		out = append(out, item.Relationship)
	}
	return out, nil
}

// collectedOnlyExpired reports whether got is want, except for relationships GC may
// drop: those that expired at or before cutoff (longer ago than the window).
func collectedOnlyExpired(got, want []rel.Relationship, cutoff time.Time) bool {
	i := 0
	for _, w := range want {
		if i < len(got) && got[i].Key() == w.Key() {
			if !sameRel(got[i], w) {
				return false
			}
			i++
		} else if !w.ExpiredAt(cutoff) {
			return false
		}
	}
	return i == len(got)
}

func sameRel(a, b rel.Relationship) bool {
	if (a.Caveat == nil) != (b.Caveat == nil) || (a.Expiration == nil) != (b.Expiration == nil) {
		return false
	}
	if a.Expiration != nil && !a.Expiration.Equal(*b.Expiration) {
		return false
	}
	return a.Caveat == nil || (a.Caveat.Name == b.Caveat.Name && fmt.Sprint(a.Caveat.Context) == fmt.Sprint(b.Caveat.Context))
}

func randomWrite(t *testing.T, s *Store, c *clock, rnd *rand.Rand) {
	pick := func(xs ...string) string { return xs[rnd.IntN(len(xs))] }
	var us []store.Update
	seen := map[rel.Key]bool{}
	for range 1 + rnd.IntN(6) {
		r := relationship(pick("doc", "folder"), pick("a", "b", "c", "d", "e"), pick("viewer", "owner"),
			pick("user", "group"), pick("x", "y", "z", "*"), pick("", "member"))
		if seen[r.Key()] {
			continue
		}
		seen[r.Key()] = true
		if rnd.IntN(4) == 0 {
			e := c.Now().Add(time.Duration(rnd.IntN(20)) * time.Minute)
			r.Expiration = &e
		}
		if rnd.IntN(5) == 0 {
			r.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"v": float64(rnd.IntN(2))}}
		}
		op := store.Touch
		if rnd.IntN(3) == 0 {
			op = store.Delete
		}
		us = append(us, store.Update{Op: op, Relationship: r})
	}
	if _, err := s.Write(context.Background(), nil, us, nil); err != nil {
		t.Fatal(err)
	}
}

// TestTooManyRetainedRevisions: a write that would need a revision offset records
// cannot hold fails with a clear error and changes nothing; once the GC window lets
// old revisions go, writes succeed again.
func TestTooManyRetainedRevisions(t *testing.T) {
	defer func(span uint64) { revisionSpan = span }(revisionSpan)
	revisionSpan = 5
	s, c := newTestStore(t, time.Hour)
	x := relationship("doc", "a", "viewer", "user", "x", "")
	var revs []store.Revision
	for range 3 {
		revs = append(revs, mustWrite(t, s, store.Touch, x))
		c.advance(time.Minute)
	}
	head := s.head
	_, err := s.Write(context.Background(), nil, []store.Update{{Op: store.Create, Relationship: relationship("doc", "b", "viewer", "user", "y", "")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "shorten the GC window") {
		t.Fatalf("write past the revision span: %v", err)
	}
	if s.head != head {
		t.Fatalf("the failed write moved the head from %d to %d", head, s.head)
	}
	for _, rev := range revs {
		if got := readAll(t, s, rev, store.Filter{}); len(got) != 1 {
			t.Fatalf("revision %d reads %v after the failed write", rev, got)
		}
	}
	c.advance(2 * time.Hour)
	rev := mustWrite(t, s, store.Create, relationship("doc", "b", "viewer", "user", "y", ""))
	if got := readAll(t, s, rev, store.Filter{}); len(got) != 2 {
		t.Fatalf("after the window passed, the head reads %v", got)
	}
	checkInvariants(t, s)
}
