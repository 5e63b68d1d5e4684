package memory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

func TestBackgroundCollector(t *testing.T) {
	s := New(Options{GCWindow: time.Millisecond, GCInterval: 5 * time.Millisecond})
	defer s.Close()
	x := relationship("doc", "a", "viewer", "user", "x", "")
	mustWrite(t, s, store.Create, x)
	mustWrite(t, s, store.Delete, x)
	time.Sleep(2 * time.Millisecond)
	mustWrite(t, s, store.Create, relationship("doc", "b", "viewer", "user", "y", ""))
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Records != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("background collector did not free the deleted record: %+v", s.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	rev := mustWrite(t, s, store.Create, relationship("doc", "a", "viewer", "user", "x", ""))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Write(ctx, nil, nil, nil); err == nil {
		t.Fatal("write to a closed store succeeded")
	}
	if _, err := s.WriteSchema(ctx, "x", nil); err == nil {
		t.Fatal("schema write to a closed store succeeded")
	}
	if got := readAll(t, s, rev, store.Filter{}); len(got) != 1 {
		t.Fatalf("read after close: %v", got)
	}
}

// TestReversePlanManyBatches reads a subject with more relationships than one lock hold
// visits; the reverse plan must still return them all, sorted, across writes and GC.
func TestReversePlanManyBatches(t *testing.T) {
	s, c := newTestStore(t, time.Hour)
	var rs []rel.Relationship
	for i := range reverseBatch + 500 {
		rs = append(rs, relationship("doc", fmt.Sprintf("d%05d", (i*7919)%(reverseBatch+500)), "viewer", "user", "alice", ""))
	}
	// Many other subjects on the same documents make the forward walk costlier.
	for i := range 3 * (reverseBatch + 500) {
		rs = append(rs, relationship("doc", fmt.Sprintf("d%05d", i%(reverseBatch+500)), "viewer", "user", fmt.Sprint("u", i), ""))
	}
	rev := mustWrite(t, s, store.Create, rs...)
	f := store.Filter{ResourceType: "doc", Relation: "viewer", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice"}}}
	q := new(query)
	if err := q.start(context.Background(), s, uint64(rev), f, store.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	var batch []rel.Relationship
	if _, err := q.fill(&batch, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := q.plan.(*reversePlan); !ok {
		t.Fatalf("plan %T, want the reverse plan", q.plan)
	}
	want := readAll(t, s, rev, f)
	if len(want) != reverseBatch+500 || !slices.IsSortedFunc(want, store.CompareKeys) {
		t.Fatalf("read %d relationships (sorted: %v), want %d sorted", len(want), slices.IsSortedFunc(want, store.CompareKeys), reverseBatch+500)
	}
	// The sorted matches are handed over a batch at a time, as record indexes until
	// then: writes and GC between the batches change nothing the reader's revision
	// sees, and a cursor resumes after its relationship.
	got, cursor := readAcrossWrites(t, s, c, rev, f, 2*batchItems+10, func(n int) {
		mustWrite(t, s, store.Delete, rs[n])
		mustWrite(t, s, store.Create, relationship("doc", fmt.Sprint("e", n), "viewer", "user", "alice", ""))
	})
	if !slices.Equal(got, want) {
		t.Fatalf("read %d relationships across writes, want %d", len(got), len(want))
	}
	rest := readKeys(t, s, rev, f, store.QueryOptions{After: cursor, Limit: 100})
	if !slices.Equal(rest, want[2*batchItems+10:2*batchItems+110]) {
		t.Fatalf("resumed from a cursor: %d relationships, want the next 100", len(rest))
	}
	checkInvariants(t, s)
}

// TestScanResumesAcrossWrites writes between the batches of a scan at an old
// revision: resources added or removed meanwhile must not derail the walk.
func TestScanResumesAcrossWrites(t *testing.T) {
	s, c := newTestStore(t, time.Hour)
	var rs []rel.Relationship
	for i := range 3 * batchItems {
		rs = append(rs, relationship("doc", fmt.Sprintf("d%05d", 2*i), "viewer", "user", "x", ""))
	}
	rev := mustWrite(t, s, store.Create, rs...)
	want := readAll(t, s, rev, store.Filter{ResourceType: "doc"})
	got, _ := readAcrossWrites(t, s, c, rev, store.Filter{ResourceType: "doc"}, 0, func(n int) {
		// Delete the current resource and its neighbours, add new ones around it.
		i := 2 * (n - 1)
		mustWrite(t, s, store.Delete, rs[n-1], rs[n])
		mustWrite(t, s, store.Create, relationship("doc", fmt.Sprintf("d%05d", i+1), "viewer", "user", "x", ""),
			relationship("doc", fmt.Sprintf("d%05d", i+3), "viewer", "user", "x", ""))
	})
	if !slices.Equal(got, want) {
		t.Fatalf("scan across writes read %d relationships, want %d", len(got), len(want))
	}
	checkInvariants(t, s)
}

// TestLargeGroupAcrossBatches reads one group of more relationships than a batch
// holds: each batch hands over at most batchItems of them, in key order, the rest of
// the group waits as record indexes, and writes and GC between the batches change
// nothing the reader's revision sees; a cursor inside the group resumes after it.
func TestLargeGroupAcrossBatches(t *testing.T) {
	s, c := newTestStore(t, time.Hour)
	n := 3*batchItems + 7
	var rs []rel.Relationship
	for i := range n {
		rs = append(rs, relationship("doc", "d", "viewer", "user", fmt.Sprintf("u%05d", (i*7919)%n), ""))
	}
	rs = append(rs, relationship("doc", "e", "viewer", "user", "u0", ""))
	rev := mustWrite(t, s, store.Create, rs...)
	f := store.Filter{ResourceType: "doc"}
	want := readAll(t, s, rev, f)
	if len(want) != n+1 || !slices.IsSortedFunc(want, store.CompareKeys) {
		t.Fatalf("read %d relationships (sorted: %v), want %d sorted", len(want), slices.IsSortedFunc(want, store.CompareKeys), n+1)
	}
	q := new(query)
	if err := q.start(context.Background(), s, uint64(rev), f, store.QueryOptions{}); err != nil {
		t.Fatal(err)
	}
	var batch []rel.Relationship
	if done, err := q.fill(&batch, 0); err != nil || done || len(batch) != batchItems {
		t.Fatalf("first batch: %d relationships, done %v, %v; want %d, not done", len(batch), done, err, batchItems)
	}
	got, cursor := readAcrossWrites(t, s, c, rev, f, batchItems+10, func(n int) {
		mustWrite(t, s, store.Delete, rs[n])
		mustWrite(t, s, store.Create, relationship("doc", "d", "viewer", "user", fmt.Sprint("new", n), ""))
	})
	if !slices.Equal(got, want) {
		t.Fatalf("read %d relationships across writes, want %d", len(got), len(want))
	}
	rest := readKeys(t, s, rev, f, store.QueryOptions{After: cursor})
	if !slices.Equal(rest, want[batchItems+10:]) {
		t.Fatalf("resumed inside the group: %d relationships, want %d", len(rest), len(want)-batchItems-10)
	}
	checkInvariants(t, s)
}

// readAcrossWrites reads f at rev, calling write(n) after the first of each batch (n
// read so far) and then letting GC free what it can (nothing rev sees); it returns the
// keys read and the cursor of the cursorAt-th (none for 0).
func readAcrossWrites(t *testing.T, s *Store, c *clock, rev store.Revision, f store.Filter, cursorAt int, write func(n int)) ([]rel.Key, store.Cursor) {
	t.Helper()
	r, err := s.Reader(context.Background(), rev)
	if err != nil {
		t.Fatal(err)
	}
	var got []rel.Key
	var cursor store.Cursor
	for item, err := range r.Query(context.Background(), f, store.QueryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, item.Relationship.Key())
		if len(got)%batchItems == 1 {
			write(len(got))
			c.advance(time.Minute)
			s.GC(c.Now())
		}
		if len(got) == cursorAt {
			cursor = item.Cursor()
		}
	}
	return got, cursor
}

func TestExtremeExpirations(t *testing.T) {
	s, _ := newTestStore(t, time.Hour)
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	ancient := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	epoch := time.Unix(0, 0)
	a := relationship("doc", "a", "viewer", "user", "far", "")
	a.Expiration = &far
	b := relationship("doc", "a", "viewer", "user", "ancient", "")
	b.Expiration = &ancient
	c := relationship("doc", "a", "viewer", "user", "epoch", "")
	c.Expiration = &epoch
	rev := mustWrite(t, s, store.Create, a, b, c)
	got := readAll(t, s, rev, store.Filter{})
	if len(got) != 1 || got[0].SubjectID != "far" {
		t.Fatalf("read %v, want only the far-future expiration", got)
	}
	if got := readAll(t, s, rev, store.Filter{IncludeExpired: true}); len(got) != 3 {
		t.Fatalf("read %v with expired, want all three", got)
	}
}

func TestCaveatContextKinds(t *testing.T) {
	s, _ := newTestStore(t, time.Hour)
	x := relationship("doc", "a", "viewer", "user", "x", "")
	ctx := map[string]any{"list": []string{"a"}, "map": map[string]string{"k": "v"}}
	x.Caveat = &rel.Caveat{Name: "c", Context: ctx}
	rev := mustWrite(t, s, store.Create, x)
	ctx["list"].([]string)[0] = "changed"
	ctx["map"].(map[string]string)["k"] = "changed"
	r, _ := s.Reader(context.Background(), rev)
	for item, err := range r.Query(context.Background(), store.Filter{}, store.QueryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		c := item.Relationship.Caveat.Context
		if c["list"].([]string)[0] != "a" || c["map"].(map[string]string)["k"] != "v" {
			t.Fatalf("caller's change reached the stored context: %v", c)
		}
	}
}

// TestTooManyNames: records keep types and relations in 15-bit name slots; a write
// that would need more fails with a clear error and changes nothing.
func TestTooManyNames(t *testing.T) {
	s := New(Options{GCInterval: -1})
	defer s.Close()
	var rs []rel.Relationship
	for i := range maxNames / 4 { // four new names each
		rs = append(rs, relationship(fmt.Sprint("t", i), "a", fmt.Sprint("r", i), fmt.Sprint("s", i), "x", fmt.Sprint("m", i)))
	}
	mustWrite(t, s, store.Create, rs...)
	head := s.head
	_, err := s.Write(context.Background(), nil, []store.Update{{Op: store.Create, Relationship: relationship("t0", "b", "r0", "s0", "y", "newrel")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "at most 32768 distinct type and relation names") {
		t.Fatalf("write of a name past the limit: %v", err)
	}
	if s.head != head {
		t.Fatal("the refused write committed a revision")
	}
	// Names already held still write.
	mustWrite(t, s, store.Create, relationship("t0", "b", "r0", "s0", "y", "m0"))
}

// TestNameSlotsReused: the name slots of types and relations that no record uses any
// more are freed by garbage collection, so names that come and go never exhaust them.
func TestNameSlotsReused(t *testing.T) {
	s, c := newTestStore(t, time.Minute)
	for i := range 100 {
		x := relationship(fmt.Sprint("t", i), "a", fmt.Sprint("r", i), fmt.Sprint("s", i), "x", fmt.Sprint("m", i))
		mustWrite(t, s, store.Create, x)
		mustWrite(t, s, store.Delete, x)
		c.advance(2 * time.Minute)
		mustWrite(t, s, store.Touch, relationship("doc", "keep", "viewer", "user", "k", ""))
		c.advance(2 * time.Minute)
		s.GC(c.Now())
		checkInvariants(t, s)
	}
	if n := len(s.recs.names); n > 8 {
		t.Fatalf("100 names written and collected in turn took %d name slots; want them reused", n)
	}
	if got := readAll(t, s, store.Revision(s.head), store.Filter{ResourceType: "doc"}); len(got) != 1 {
		t.Fatalf("after reuse read %v", got)
	}
}

// TestSortedRuns reads several subjects' relationships in key order (the merge of
// their chains' sorted runs), whole and a page at a time from cursors, at revisions
// before and after writes into those chains and after GC frees records of them: each
// read equals the relationships of those subjects at its revision, in key order, and
// the runs kept follow the chains (checkInvariants).
func TestSortedRuns(t *testing.T) {
	s, c := newTestStore(t, time.Hour)
	rnd := rand.New(rand.NewPCG(3, 4))
	groups := []string{"g1", "g2", "g3", "g4"} // g4 has fewer than runKeepMin
	var rs []rel.Relationship
	for i := range 600 {
		g := groups[rnd.IntN(3)]
		if i%100 == 0 {
			g = "g4"
		}
		rs = append(rs, relationship("doc", fmt.Sprintf("d%03d", rnd.IntN(400)), "viewer", "group", g, []string{"member", "admin"}[rnd.IntN(2)]))
	}
	slices.SortFunc(rs, func(a, b rel.Relationship) int { return store.CompareKeys(a.Key(), b.Key()) })
	rs = slices.CompactFunc(rs, func(a, b rel.Relationship) bool { return a.Key() == b.Key() })
	rev1 := mustWrite(t, s, store.Create, rs...)
	f := store.Filter{ResourceType: "doc", Relation: "viewer", Subject: &store.SubjectFilter{Type: "group", IDs: []string{"g1", "g2", "g4"}}}
	// want is the filter's relationships at rev, picked from a read of them all.
	want := func(rev store.Revision) []rel.Key {
		var out []rel.Key
		for _, k := range readAll(t, s, rev, store.Filter{ResourceType: "doc"}) {
			if slices.Contains(f.Subject.IDs, k.SubjectID) {
				out = append(out, k)
			}
		}
		return out
	}
	check := func(rev store.Revision, wantKeys []rel.Key) {
		t.Helper()
		if got := readAll(t, s, rev, f); !slices.Equal(got, wantKeys) {
			t.Fatalf("at %d read %d relationships, want %d", rev, len(got), len(wantKeys))
		}
		var paged []rel.Key
		var cursor store.Cursor
		for {
			r, err := s.Reader(context.Background(), rev)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for item, err := range r.Query(context.Background(), f, store.QueryOptions{Limit: 37, After: cursor}) {
				if err != nil {
					t.Fatal(err)
				}
				paged, cursor = append(paged, item.Relationship.Key()), item.Cursor()
				n++
			}
			if n < 37 {
				break
			}
		}
		if !slices.Equal(paged, wantKeys) {
			t.Fatalf("at %d read %d relationships by pages, want %d", rev, len(paged), len(wantKeys))
		}
		checkInvariants(t, s)
	}
	want1 := want(rev1)
	check(rev1, want1)
	if kept := len(s.runs.runs); kept != 2 {
		t.Fatalf("%d runs kept, want those of g1 and g2", kept)
	}
	// New records at the chains' heads make their runs stale: a read at the new
	// revision sorts the new records and merges them in, one at the old revision sees
	// what it saw.
	rev2 := mustWrite(t, s, store.Create, relationship("doc", "d000", "viewer", "group", "g1", "owner"),
		relationship("doc", "d999", "viewer", "group", "g2", "member"))
	check(rev2, want(rev2))
	check(rev1, want1)
	// Deleted records stay in their runs until GC frees them and drops the runs.
	var gone []rel.Relationship
	for _, x := range rs[:200] {
		if x.Subject.Object.ID == "g1" {
			gone = append(gone, x)
		}
	}
	rev3 := mustWrite(t, s, store.Delete, gone...)
	want3 := want(rev3)
	check(rev3, want3)
	c.advance(2 * time.Hour)
	mustWrite(t, s, store.Touch, relationship("doc", "x", "viewer", "user", "u", ""))
	if s.GC(c.Now()) == 0 {
		t.Fatal("GC freed nothing")
	}
	if len(s.runs.runs) != 1 {
		t.Fatalf("%d runs kept after GC, want only g2's", len(s.runs.runs))
	}
	check(rev3, want3)
}

// TestSortedRunsConcurrent reads several subjects' relationships in key order from
// readers at once, while a writer adds and deletes relationships of those subjects and
// the collector frees what it may: every read equals the relationships those subjects
// had at its revision, picked from a read of them all (run with -race, it also checks
// that readers share the kept runs safely).
func TestSortedRunsConcurrent(t *testing.T) {
	s, c := newTestStore(t, time.Minute)
	ctx := context.Background()
	groups := []string{"g0", "g1", "g2", "g3", "g4", "g5"}
	random := func(rnd *rand.Rand) rel.Relationship {
		return relationship("doc", fmt.Sprintf("d%03d", rnd.IntN(300)), "viewer", "group", groups[rnd.IntN(len(groups))], "member")
	}
	seed := rand.New(rand.NewPCG(5, 6))
	for range 600 {
		mustWrite(t, s, store.Touch, random(seed))
	}
	f := store.Filter{ResourceType: "doc", Relation: "viewer", Subject: &store.SubjectFilter{Type: "group", IDs: groups[:4]}}
	// read reads f at the head, and the same relationships picked from a read of all.
	read := func() (rev store.Revision, got, want []rel.Key, err error) {
		if rev, err = s.HeadRevision(ctx); err != nil {
			return 0, nil, nil, err
		}
		r, err := s.Reader(ctx, rev)
		if err != nil {
			return 0, nil, nil, err
		}
		for item, err := range r.Query(ctx, f, store.QueryOptions{Limit: 500}) {
			if err != nil {
				return 0, nil, nil, err
			}
			got = append(got, item.Relationship.Key())
		}
		for item, err := range r.Query(ctx, store.Filter{ResourceType: "doc"}, store.QueryOptions{}) {
			if err != nil {
				return 0, nil, nil, err
			}
			if k := item.Relationship.Key(); slices.Contains(f.Subject.IDs, k.SubjectID) {
				want = append(want, k)
			}
		}
		return rev, got, want[:min(len(want), 500)], nil
	}
	written := make(chan struct{})
	go func() {
		defer close(written)
		rnd := rand.New(rand.NewPCG(7, 8))
		for range 300 {
			op := store.Touch
			if rnd.IntN(2) == 0 {
				op = store.Delete
			}
			if _, err := s.Write(ctx, nil, []store.Update{{Op: op, Relationship: random(rnd)}}, nil); err != nil {
				t.Error(err)
				return
			}
			c.advance(time.Second)
			s.GC(c.Now())
		}
	}()
	var readers sync.WaitGroup
	for range 3 {
		readers.Go(func() {
			// At least 40 reads each, and reads until the writes end; a read whose
			// revision the collector passed (the writes outran it) is taken again.
			for n := 0; n < 40 || !isClosed(written); {
				rev, got, want, err := read()
				if errors.Is(err, store.ErrRevisionGone) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.Equal(got, want) {
					t.Errorf("at %d read %d relationships, want %d", rev, len(got), len(want))
					return
				}
				n++
			}
		})
	}
	readers.Wait()
	<-written
	checkInvariants(t, s)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
