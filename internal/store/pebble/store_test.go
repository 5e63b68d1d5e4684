package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/storetest"
)

// TestConformanceEagerSeeks reruns the suite with every miss seeking and with runs of
// the reverse index read one or two entries at a time, so that the skip and merge
// paths meet every filter the suite has.
func TestConformanceEagerSeeks(t *testing.T) {
	setVar(t, &seekAfterMisses, 1)
	setVar(t, &firstChunk, 1)
	setVar(t, &maxChunk, 2)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, Options{})
	})
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2100, 1, 2, 3, 4, 5, 6, time.UTC)
	caveated := relationship("document", "a", "viewer", "user", "alice", "")
	caveated.Caveat = &rel.Caveat{Name: "ip", Context: map[string]any{"cidr": "10.0.0.0/8", "n": 2.5}}
	expiring := relationship("document", "a", "viewer", "group", "eng", "member")
	expiring.Expiration = &exp
	r1, err := s.WriteSchema(ctx, "definition user {}", nil)
	if err != nil {
		t.Fatal(err)
	}
	r2 := mustWrite(t, s, store.Create, caveated, expiring, relationship("document", "b", "viewer", "user", "bob", ""))
	r3 := mustWrite(t, s, store.Delete, relationship("document", "b", "viewer", "user", "bob", ""))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDir(t, dir, Options{})
	if head, _ := s.HeadRevision(ctx); head != r3 {
		t.Fatalf("head after reopen is %d, want %d", head, r3)
	}
	expectKeys(t, s, r2, store.Filter{}, "document:a#viewer@group:eng#member", "document:a#viewer@user:alice", "document:b#viewer@user:bob")
	got := readAll(t, s, r3, store.Filter{})
	if len(got) != 2 || got[0].Expiration == nil || !got[0].Expiration.Equal(exp) ||
		got[1].Caveat == nil || got[1].Caveat.Name != "ip" || got[1].Caveat.Context["cidr"] != "10.0.0.0/8" {
		t.Fatalf("after reopen read %+v", got)
	}
	for rev, want := range map[store.Revision]string{r1 - 1: "", r1: "definition user {}", r3: "definition user {}"} {
		r, err := s.Reader(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		if text, err := r.Schema(ctx); err != nil || text != want {
			t.Fatalf("schema at %d after reopen: %q, %v; want %q", rev, text, err, want)
		}
	}
	// Revisions keep growing from where they were.
	if r4 := mustWrite(t, s, store.Touch, relationship("document", "c", "viewer", "user", "carol", "")); r4 != r3+1 {
		t.Fatalf("first write after reopen got revision %d, want %d", r4, r3+1)
	}
}

func TestLockedDirectory(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "data directory "+dir+" is in use by another process") {
		t.Fatalf("second open of a locked directory: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(precious, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrNotLatch) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("open of a foreign directory: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("open of a foreign directory left %d entries, want only notes.txt", len(entries))
	}
	if b, _ := os.ReadFile(precious); string(b) != "keep me" {
		t.Fatalf("foreign file changed to %q", b)
	}
}

func TestForeignPebbleDatabase(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}, FS: vfs.Default})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("hello"), []byte("world"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrNotLatch) {
		t.Fatalf("open of another program's pebble database: %v", err)
	}
	// Even with a marker file, a database latch did not write is refused.
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(markerText), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrNotLatch) {
		t.Fatalf("open of another program's pebble database with a marker file: %v", err)
	}
}

func TestUnknownFormat(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(keyFormat, []byte("99"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), `"99"`) {
		t.Fatalf("open of a future format: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte("latch data directory\nformat 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("open with a future marker file: %v", err)
	}
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rev := mustWrite(t, s, store.Create, relationship("document", "a", "viewer", "user", "alice", ""))
	r, err := s.Reader(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Write(ctx, nil, nil, nil); !errors.Is(err, errClosed) {
		t.Fatalf("write after close: %v", err)
	}
	for _, err := range r.Query(ctx, store.Filter{}, store.QueryOptions{}) {
		if !errors.Is(err, errClosed) {
			t.Fatalf("query after close: %v", err)
		}
	}
	if _, err := s.Reader(ctx, rev); !errors.Is(err, errClosed) {
		t.Fatalf("reader after close: %v", err)
	}
}

// TestKeyOrderWithSpecialCharacters checks that the stored order is store.CompareKeys
// for ids using every character SpiceDB allows and some it does not.
func TestKeyOrderWithSpecialCharacters(t *testing.T) {
	s := openTest(t, Options{})
	ids := []string{"a", "a-b", "a/b", "a_b", "a|b", "a=b", "a+b", "A", "a0", "ab", "a\x01", "é", "a b", "*", "~", "a\xff"}
	var rs []rel.Relationship
	for _, id := range ids {
		rs = append(rs, relationship("doc", id, "viewer", "user", id, ""), relationship("doc", "x", "viewer", "user", id, "member"))
	}
	rev := mustWrite(t, s, store.Create, rs...)
	for _, f := range []store.Filter{{}, {Subject: &store.SubjectFilter{Type: "user", IDs: ids}}, {ResourceType: "doc", ResourceIDs: ids}} {
		got := readAll(t, s, rev, f)
		keys := make([]rel.Key, len(got))
		for i, r := range got {
			keys[i] = r.Key()
		}
		want := 0
		for _, r := range rs {
			if f.Matches(r, time.Now()) {
				want++
			}
		}
		if len(keys) != want || !slices.IsSortedFunc(keys, store.CompareKeys) {
			t.Fatalf("query %s returned %d keys, sorted %v: %q", f, len(keys), slices.IsSortedFunc(keys, store.CompareKeys), keysOf(got))
		}
	}
}

func TestNULIsRefused(t *testing.T) {
	s := openTest(t, Options{})
	_, err := s.Write(context.Background(), nil, []store.Update{{Op: store.Create, Relationship: relationship("doc", "a\x00b", "viewer", "user", "u", "")}}, nil)
	var invalid *store.InvalidUpdateError
	if !errors.As(err, &invalid) {
		t.Fatalf("write of an id with a NUL byte: %v", err)
	}
	rev := mustWrite(t, s, store.Create, relationship("doc", "a", "viewer", "user", "u", ""))
	expectKeys(t, s, rev, store.Filter{ResourceType: "doc", ResourceIDs: []string{"a\x00"}})
	expectKeys(t, s, rev, store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: []string{"u\x00"}}})
	expectKeys(t, s, rev, store.Filter{ResourceType: "doc\x00"})
}

// TestBatchedQueriesSeek checks that queries naming ids seek to them instead of
// scanning: the iterator steps stay near the number of results.
func TestBatchedQueriesSeek(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	if _, err := s.BulkLoad(ctx, generated(20000)); err != nil {
		t.Fatal(err)
	}
	var extra []rel.Relationship
	for i := range 50 {
		extra = append(extra, relationship("document", "doc-target", "viewer", "user", "user-"+string(rune('a'+i%26))+string(rune('a'+i/26)), ""))
	}
	rev := mustWrite(t, s, store.Create, extra...)
	var stats pebble.IteratorStats
	setVar(t, &iterStatsHook, func(st pebble.IteratorStats) { stats = st })
	steps := func() int {
		return stats.ForwardStepCount[pebble.InterfaceCall] + stats.ForwardSeekCount[pebble.InterfaceCall]
	}
	docs := []string{"doc-target"}
	for i := range 10 {
		docs = append(docs, "doc-"+hex8(mix32(uint32(i*100))))
	}
	got := readAll(t, s, rev, store.Filter{ResourceType: "document", ResourceIDs: docs, Relation: "viewer"})
	if len(got) != 50+40 || steps() > 3*len(got)+2*len(docs) {
		t.Fatalf("query of %d resource ids read %d relationships in %d iterator calls", len(docs), len(got), steps())
	}
	got = readAll(t, s, rev, store.Filter{ResourceType: "document", Relation: "viewer", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"user-0", "user-7919"}}})
	if len(got) == 0 || steps() > 3*len(got)+10 {
		t.Fatalf("query of 2 subject ids read %d relationships in %d iterator calls", len(got), steps())
	}
	// A check: one resource with many subjects, asking for two of them.
	got = readAll(t, s, rev, store.Filter{
		ResourceType: "document", ResourceIDs: []string{"doc-target"}, Relation: "viewer",
		Subject: &store.SubjectFilter{Type: "user", IDs: []string{"user-aa", "user-zz"}},
	})
	if len(got) != 1 || steps() > 2*seekAfterMisses+10 {
		t.Fatalf("check of 2 subjects on a wide resource read %d relationships in %d iterator calls", len(got), steps())
	}
}

func hex8(x uint32) string {
	const digits = "0123456789abcdef"
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = digits[x&15]
		x >>= 4
	}
	return string(b[:])
}

func TestComparer(t *testing.T) {
	var prefixes [][]byte
	for _, k := range []rel.Key{
		relationship("doc", "a", "viewer", "user", "x", "").Key(),
		relationship("doc", "a", "viewer", "user", "x", "member").Key(),
		relationship("doc", "ab", "viewer", "user", "x", "").Key(),
		relationship("doc", "a\xff", "v", "u", "\x09", "").Key(),
	} {
		prefixes = append(prefixes, appendForward(nil, k), appendReverse(nil, k))
	}
	prefixes = append(prefixes, keyHead, commitKey(7), schemaKey(9))
	var suffixes [][]byte
	for _, rev := range []uint64{0, 1, 2, 255, 256, 1 << 40, ^uint64(0)} {
		suffixes = append(suffixes, appendVersion(nil, rev))
	}
	// Only forward and reverse logical keys take suffixes.
	if err := pebble.CheckComparer(comparer, prefixes[:8], suffixes); err != nil {
		t.Fatal(err)
	}
	for _, p := range prefixes {
		if split(p) != len(p) {
			t.Fatalf("split(%q) = %d, want the whole key", p, split(p))
		}
	}
	k := appendVersion(appendForward(nil, relationship("d", "i", "r", "u", "s", "").Key()), 5)
	if fs, rev, ok := parseVersioned(k); !ok || rev != 5 || !bytes.Equal(fs[fSubjID], []byte("s")) {
		t.Fatalf("parseVersioned(%q) = %q, %d, %v", k, fs, rev, ok)
	}
}

// TestCheckOfAbsentKeyReadsNoBlocks checks that a check's lookup of a relationship
// that is not stored is ruled out by the table's bloom filter. Bulk-loaded and
// compacted data lives in L6, whose filters Pebble skips unless the iterator asks,
// which it does only while they fit in a quarter of the block cache: with a cache too
// small for them, no filter is read.
func TestCheckOfAbsentKeyReadsNoBlocks(t *testing.T) {
	for _, c := range []struct {
		cache int64
		hits  int64 // per absent key
	}{{0, 1}, {64 << 10, 0}} {
		ctx := context.Background()
		s := openTest(t, Options{CacheSize: c.cache})
		rev, err := s.BulkLoad(ctx, generated(20000))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.db.Compact(ctx, []byte{tagForward}, []byte{tagReverse + 1}, false); err != nil {
			t.Fatal(err)
		}
		doc := fmt.Sprintf("doc-%08x", mix32(7))
		users := []string{"user-not-stored", "user-7", "user-8"}
		before := s.db.Metrics().Filter.Hits
		for _, user := range users {
			got := readAll(t, s, rev, store.Filter{
				ResourceType: "document", ResourceIDs: []string{doc}, Relation: "viewer",
				Subject: &store.SubjectFilter{Type: "user", IDs: []string{user}, RelationSet: true},
			})
			if len(got) != 0 {
				t.Fatalf("check of absent %s on %s found %v", user, doc, got)
			}
		}
		if hits := s.db.Metrics().Filter.Hits - before; hits != c.hits*int64(len(users)) {
			t.Fatalf("cache %d: %d checks of absent relationships, the bloom filters ruled out %d", c.cache, len(users), hits)
		}
	}
}

// TestReadsTouchOnlyTheSubjectType holds that a read of a group's subjects of one type
// seeks to them and reads nothing else: a check's read of a group's nested groups must
// not walk its users, in whatever order the types sort.
func TestReadsTouchOnlyTheSubjectType(t *testing.T) {
	s := openTest(t, Options{})
	var rs []rel.Relationship
	for i := range 300 {
		id := fmt.Sprintf("u%04d", i)
		rs = append(rs, relationship("group", "top", "member", "account", id, ""), relationship("group", "top", "member", "user", id, ""))
	}
	for i := range 10 {
		rs = append(rs, relationship("group", "top", "member", "group", fmt.Sprintf("g%02d", i), "member"))
	}
	rev := mustWrite(t, s, store.Create, rs...)
	var stats pebble.IteratorStats
	setVar(t, &iterStatsHook, func(st pebble.IteratorStats) { stats = st })
	got := readAll(t, s, rev, store.Filter{
		ResourceType: "group", ResourceIDs: []string{"top"}, Relation: "member",
		Subject: &store.SubjectFilter{Type: "group", Relation: "member", RelationSet: true},
	})
	steps := stats.ForwardStepCount[pebble.InterfaceCall] + stats.ForwardSeekCount[pebble.InterfaceCall]
	if len(got) != 10 || steps > len(got)+2 {
		t.Fatalf("read %d subject sets of 610 members in %d iterator calls, want 10 in at most 12", len(got), steps)
	}
}
