package pebble

import (
	"context"
	"errors"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/storetest"
)

func TestBulkLoad(t *testing.T) {
	ctx := context.Background()
	setVar(t, &bulkChunk, 100)
	s := openTest(t, Options{})
	base := mustWrite(t, s, store.Create, relationship("folder", "f", "viewer", "user", "u", ""))
	exp := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	special := relationship("document", "zz", "viewer", "user", "carol", "")
	special.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"x": "y"}}
	special.Expiration = &exp
	rels := append(collect(t, generated(1000)), special)
	rev, err := s.BulkLoad(ctx, storetest.RelSeq(rels, nil))
	if err != nil {
		t.Fatal(err)
	}
	if rev != base+1 {
		t.Fatalf("bulk load got revision %d, want %d", rev, base+1)
	}
	if got := readAll(t, s, rev, store.Filter{ResourceType: "document"}); len(got) != 1001 {
		t.Fatalf("after bulk load read %d documents, want 1001", len(got))
	}
	expectKeys(t, s, base, store.Filter{ResourceType: "document"})
	got := readAll(t, s, rev, store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: []string{"carol"}}})
	if len(got) != 1 || got[0].Caveat == nil || got[0].Caveat.Context["x"] != "y" || !got[0].Expiration.Equal(exp) {
		t.Fatalf("bulk-loaded caveat and expiration read back as %+v", got)
	}
	if n := countKeys(t, s, tagExpiring); n != 1 {
		t.Fatalf("bulk load wrote %d expiration entries, want 1", n)
	}
}

// TestBulkLoadLandsBelowL0: a load's chunks overlap one another, but the tables it
// ingests do not, so a load into an empty store leaves nothing in L0 to compact.
func TestBulkLoadLandsBelowL0(t *testing.T) {
	setVar(t, &bulkChunk, 100)
	s := openTest(t, Options{})
	if _, err := s.BulkLoad(context.Background(), storetest.RelSeq(collect(t, generated(1000)), nil)); err != nil {
		t.Fatal(err)
	}
	m := s.db.Metrics()
	if n := m.Levels[0].TablesCount; n != 0 {
		t.Errorf("the load left %d tables in L0, want none", n)
	}
	if n := countKeys(t, s, tagForward); n != 1000 {
		t.Errorf("the load wrote %d forward keys, want 1000", n)
	}
}

func TestBulkLoadFailsWhole(t *testing.T) {
	ctx := context.Background()
	setVar(t, &bulkChunk, 10)
	s := openTest(t, Options{})
	existing := relationship("document", "exists", "viewer", "user", "u", "")
	expired := relationship("document", "expired", "viewer", "user", "u", "")
	past := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	expired.Expiration = &past
	head := mustWrite(t, s, store.Create, existing, expired)
	keys := countKeys(t, s, tagForward)
	many := collect(t, generated(95))
	nameless := relationship("document", "n", "viewer", "user", "u", "")
	nameless.Caveat = &rel.Caveat{}
	errSource := errors.New("source failed")

	var exists *store.AlreadyExistsError
	var invalid *store.InvalidUpdateError
	for _, c := range []struct {
		name   string
		rels   iter.Seq2[rel.Relationship, error]
		target any
	}{
		{"existing", storetest.RelSeq(append(many[:50:50], existing), nil), &exists},
		{"existing expired", storetest.RelSeq(append(many[:50:50], expired), nil), &exists},
		{"duplicate in one chunk", storetest.RelSeq(append(many[:5:5], many[3]), nil), &exists},
		{"duplicate across chunks", storetest.RelSeq(append(many[:50:50], many[3]), nil), &exists},
		{"invalid", storetest.RelSeq(append(many[:50:50], nameless), nil), &invalid},
		{"source error", storetest.RelSeq(many[:50], errSource), errSource},
	} {
		_, err := s.BulkLoad(ctx, c.rels)
		if e, ok := c.target.(error); ok && !errors.Is(err, e) || !ok && !errors.As(err, c.target) {
			t.Fatalf("%s: bulk load returned %v, want %T", c.name, err, c.target)
		}
		if c.target == &exists && strings.HasPrefix(err.Error(), "pebble store") {
			t.Errorf("%s: %q names the store, not only the relationship", c.name, err)
		}
		if h, _ := s.HeadRevision(ctx); h != head {
			t.Fatalf("%s: failed bulk load moved the head from %d to %d", c.name, head, h)
		}
		if n := countKeys(t, s, tagForward); n != keys {
			t.Fatalf("%s: failed bulk load left %d forward keys, want %d", c.name, n, keys)
		}
		if _, ok, _ := s.get(keyBulk); ok {
			t.Fatalf("%s: failed bulk load left its marker", c.name)
		}
	}
	// The store still works, and the load can be done once its input is right.
	if _, err := s.BulkLoad(ctx, storetest.RelSeq(many, nil)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, store.Touch, existing)
}

// TestAbandonedBulkLoad stops a bulk load after it ingested its tables but before it
// committed, as a crash would, and checks that Open removes them.
func TestAbandonedBulkLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	kept := relationship("folder", "f", "viewer", "user", "u", "")
	head := mustWrite(t, s, store.Create, kept)
	s.writeMu.Lock()
	l := &bulkLoad{s: s, rev: s.applied + 1, tmp: filepath.Join(dir, bulkTmp), bulkScratch: newBulkScratch()}
	if err := s.db.Set(keyBulk, u64(l.rev), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(l.tmp, 0o750); err != nil {
		t.Fatal(err)
	}
	for r := range generated(50) {
		if err := l.add(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.ingestRuns(ctx); err != nil {
		t.Fatal(err)
	}
	s.writeMu.Unlock()
	if n := countKeys(t, s, tagForward); n != 51 {
		t.Fatalf("partial load wrote %d forward keys, want 51", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDir(t, dir, Options{})
	for tag, want := range map[byte]int{tagForward: 1, tagReverse: 1} {
		if n := countKeys(t, s, tag); n != want {
			t.Fatalf("after reopen %d keys with tag %q, want %d", n, tag, want)
		}
	}
	if _, ok, _ := s.get(keyBulk); ok {
		t.Fatal("reopen left the bulk marker")
	}
	rev := mustWrite(t, s, store.Create, relationship("folder", "g", "viewer", "user", "u", ""))
	if rev != head+1 {
		t.Fatalf("write after an abandoned load got revision %d, want %d", rev, head+1)
	}
	expectKeys(t, s, rev, store.Filter{}, "folder:f#viewer@user:u", "folder:g#viewer@user:u")
}

func collect(t testing.TB, rels iter.Seq2[rel.Relationship, error]) []rel.Relationship {
	var out []rel.Relationship
	for r, err := range rels {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// BenchmarkBulkLoad loads 1,000,000 relationships per iteration into a fresh store
// and reports the rate and the disk space per relationship once the memtables are
// flushed.
func BenchmarkBulkLoad(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	var loaded int
	var elapsed time.Duration
	var diskPerRel float64
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		s, err := Open(dir, Options{GCInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := s.BulkLoad(ctx, generated(n)); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
		loaded += n
		b.StopTimer()
		if err := s.db.Flush(); err != nil {
			b.Fatal(err)
		}
		diskPerRel = float64(dirSize(b, dir)) / n
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(loaded)/elapsed.Seconds(), "rels/s")
	b.ReportMetric(diskPerRel, "disk-B/rel")
}

func dirSize(t testing.TB, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// BenchmarkQuery measures the query shapes the engine sends, over 200,000
// relationships: a check (one resource and one subject; also three resources, and the
// one-resource check from parallel goroutines, as the engine sends many at once), the
// relationships of one resource's relation (a check's arrow reads its tupleset so), an
// arrow step (100 resources of one relation), a lookup's chunk (1,000 resources in id
// order, a quarter of those in their key range, of one relation) and a reverse lookup
// (the resources of 10 subjects).
func BenchmarkQuery(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, Options{GCInterval: -1})
	rev, err := s.BulkLoad(ctx, generated(200_000))
	if err != nil {
		b.Fatal(err)
	}
	r, err := s.Reader(ctx, rev)
	if err != nil {
		b.Fatal(err)
	}
	var docs, users []string
	for i := range 100 {
		docs = append(docs, "doc-"+hex8(mix32(uint32(i*37))))
	}
	for i := range 10 {
		users = append(users, "user-"+strconv.Itoa(i*7919%100000))
	}
	var chunk []string
	last, distinct := "", 0
	for _, x := range readAll(b, s, rev, store.Filter{ResourceType: "document", Relation: "viewer"}) {
		if id := x.Resource.ID; id != last && len(chunk) < 1000 {
			if last = id; distinct%4 == 0 {
				chunk = append(chunk, id)
			}
			distinct++
		}
	}
	first := readAll(b, s, rev, store.Filter{ResourceType: "document", ResourceIDs: docs[:1]})[0]
	check := store.Filter{
		ResourceType: "document", ResourceIDs: docs[:1], Relation: "viewer",
		Subject: &store.SubjectFilter{Type: "user", IDs: []string{first.Subject.Object.ID}},
	}
	check3 := check
	check3.ResourceIDs = docs[:3]
	// A check as the engine asks it names the subject relation, so every key is named
	// whole; most checks name a key that is not stored.
	checkKey, absent, absentKey := check, check, check
	checkKey.Subject = &store.SubjectFilter{Type: "user", IDs: check.Subject.IDs, RelationSet: true}
	absent.Subject = &store.SubjectFilter{Type: "user", IDs: []string{"user-absent"}}
	absentKey.Subject = &store.SubjectFilter{Type: "user", IDs: []string{"user-absent"}, RelationSet: true}
	for _, c := range []struct {
		name string
		f    store.Filter
	}{
		{"check", check},
		{"check-key", checkKey},
		{"check-absent", absent},
		{"check-absent-key", absentKey},
		{"check3", check3},
		{"group1", store.Filter{ResourceType: "document", ResourceIDs: docs[:1], Relation: "viewer"}},
		{"arrow100", store.Filter{ResourceType: "document", ResourceIDs: docs, Relation: "viewer"}},
		{"chunk1000", store.Filter{ResourceType: "document", ResourceIDs: chunk, Relation: "viewer"}},
		{"reverse10", store.Filter{ResourceType: "document", Relation: "viewer", Subject: &store.SubjectFilter{Type: "user", IDs: users}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for range b.N {
				for _, err := range r.Query(ctx, c.f, store.QueryOptions{}) {
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
			}
			if n == 0 && !strings.Contains(c.name, "absent") {
				b.Fatal("no results")
			}
			b.ReportMetric(float64(n)/float64(b.N), "results/op")
		})
	}
	// The same checks as a check's reads hand them over: to a visitor (store.Each).
	for name, f := range map[string]store.Filter{"check-key-each": checkKey, "check-absent-key-each": absentKey} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var v countVisitor
			for range b.N {
				if err := store.Each(ctx, r, f, store.QueryOptions{}, &v); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(v)/float64(b.N), "results/op")
		})
	}
	b.Run("check-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for _, err := range r.Query(ctx, check, store.QueryOptions{}) {
					if err != nil {
						b.Error(err)
						return
					}
				}
			}
		})
	})
}

// countVisitor counts the items it visits.
type countVisitor int

func (c *countVisitor) Visit(store.Item) bool {
	*c++
	return true
}

// BenchmarkWrite measures durable single-relationship writes, one writer at a time
// and from many goroutines (whose syncs the write-ahead log shares).
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	for _, par := range []int{1, 16} {
		b.Run("writers="+strconv.Itoa(par), func(b *testing.B) {
			s := openTest(b, Options{GCInterval: -1})
			var n atomic.Int64
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := relationship("document", strconv.FormatInt(n.Add(1), 10), "viewer", "user", "u", "")
					if _, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: r}}, nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
