package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// bulkChunk is how many relationships a bulk load checks and writes at a time. Each
// chunk becomes a sorted run of each kind of table (bulkmerge.go), so a larger chunk
// means fewer runs to merge. A variable so that tests can shrink it.
var bulkChunk = 1 << 18

// bulkTmp is the folder of the data directory where a bulk load writes its tables
// before Pebble ingests them.
const bulkTmp = "bulk-tmp"

// BulkLoad creates every relationship rels yields, as one new revision. It fails
// whole, leaving no trace, when a relationship already exists (even expired), is
// yielded twice, is invalid, or when rels yields an error. Other writes wait while it
// runs; readers do not.
//
// The load sorts its input in chunks and writes each chunk's versions, all created
// at the new revision, as sorted runs; at its end it merges the runs into tables that
// Pebble ingests at once, without the write-ahead log or memtables. Readers ignore
// those versions until the final, synced batch moves the head. A marker key names the
// load while it runs: if the process stops first, Open removes the load's versions.
func (s *Store) BulkLoad(ctx context.Context, rels iter.Seq2[rel.Relationship, error]) (store.Revision, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.release()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	rev := s.applied + 1
	// Synced: ingested tables are durable at once, and must never outlive the marker
	// that says they belong to an unfinished load.
	if err := s.db.Set(keyBulk, u64(rev), pebble.Sync); err != nil {
		return 0, fmt.Errorf("pebble store: starting a bulk load: %w", err)
	}
	l := &bulkLoad{s: s, rev: rev, tmp: filepath.Join(s.dir, bulkTmp), bulkScratch: newBulkScratch()}
	defer l.bulkScratch.release()
	err := l.run(ctx, rels)
	if rerr := os.RemoveAll(l.tmp); err == nil && rerr != nil {
		err = fmt.Errorf("pebble store: bulk load: %w", rerr)
	}
	if err != nil {
		if rerr := s.rollbackBulk(rev, l.spans); rerr != nil {
			return 0, fmt.Errorf("%w (and removing the partial load failed: %v)", err, rerr)
		}
		return 0, err
	}
	t := s.newTxLocked()
	defer t.close()
	_ = t.b.Delete(keyBulk, nil)
	if _, err := t.commitLocked(pebble.Sync); err != nil {
		return 0, err
	}
	s.feed.Append(store.Change{Revision: store.Revision(rev)}, true) // watchers read the load from history
	s.publish(rev)
	s.feed.Notify()
	return store.Revision(rev), nil
}

// bulkLoad is one BulkLoad in progress.
type bulkLoad struct {
	s   *Store
	rev uint64
	tmp string
	// chunks holds the forward key range of each chunk written; spans, those the load
	// ingested, which a rollback removes.
	chunks, spans [][2][]byte
	// runs holds, by kind, each chunk's sorted table: merged at the end into tables
	// that do not overlap (see ingestRuns).
	runs [numRunKinds][]string
	*bulkScratch
	written atomic.Int64 // tables written, for their names
}

// The kinds of tables a chunk writes.
const (
	runForward = iota
	runReverse
	runExpiring
	numRunKinds
)

// bulkScratch is the memory a bulk load reuses from chunk to chunk, and from one load
// to the next: importers send a data set as many loads in a row (one per stream), and
// growing a chunk's buffers afresh for each cost a tenth of an import's CPU. A pool
// keeps it between loads; the garbage collector reclaims it once loads stop.
type bulkScratch struct {
	items  []kv // the chunk: forward logical key and value body
	arena  []byte
	rev2   []kv // reverse version keys and values
	arena2 []byte
	exp    [][]byte // expiration log keys
}

var bulkScratchPool sync.Pool

func newBulkScratch() *bulkScratch {
	if b, ok := bulkScratchPool.Get().(*bulkScratch); ok {
		return b
	}
	return &bulkScratch{}
}

// release empties b and returns it to the pool.
func (b *bulkScratch) release() {
	clear(b.exp)
	b.items, b.arena, b.rev2, b.arena2, b.exp = b.items[:0], b.arena[:0], b.rev2[:0], b.arena2[:0], b.exp[:0]
	bulkScratchPool.Put(b)
}

// kv is a key and a value (or body) held in an arena.
type kv struct{ k, v []byte }

func (l *bulkLoad) run(ctx context.Context, rels iter.Seq2[rel.Relationship, error]) error {
	if err := os.MkdirAll(l.tmp, 0o750); err != nil {
		return fmt.Errorf("pebble store: bulk load: %w", err)
	}
	for r, err := range rels {
		if err != nil {
			return fmt.Errorf("pebble store: bulk load: %w", err)
		}
		if err := l.add(r); err != nil {
			return err
		}
		if len(l.items) == bulkChunk {
			if err := l.flush(ctx); err != nil {
				return err
			}
		}
	}
	if err := l.flush(ctx); err != nil {
		return err
	}
	return l.ingestRuns(ctx)
}

// add validates r and appends it to the chunk.
func (l *bulkLoad) add(r rel.Relationship) error {
	u := store.Update{Op: store.Create, Relationship: r}
	if err := checkUpdate(u); err != nil {
		return err
	}
	body, err := encodeBody(&r)
	if err != nil {
		return &store.InvalidUpdateError{Update: u, Reason: err.Error()}
	}
	l.items, l.arena = appendKV(l.items, l.arena, appendForward, r.Key(), body)
	return nil
}

// appendKV appends the key enc makes of k, and v, to arena, and their slices to kvs.
func appendKV(kvs []kv, arena []byte, enc func([]byte, rel.Key) []byte, k rel.Key, v []byte) ([]kv, []byte) {
	at := len(arena)
	arena = enc(arena, k)
	mid := len(arena)
	arena = append(arena, v...)
	return append(kvs, kv{k: arena[at:mid:mid], v: arena[mid:len(arena):len(arena)]}), arena
}

// relationshipAt decodes the relationship of a forward logical key, for errors.
func relationshipAt(fwd []byte) rel.Relationship {
	fs, _ := parseLogical(fwd[1:])
	return relationshipOf(relKey(&fs))
}

// flush checks the chunk against itself and the database, then writes its runs.
func (l *bulkLoad) flush(ctx context.Context) error {
	if len(l.items) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	slices.SortFunc(l.items, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	for i := 1; i < len(l.items); i++ {
		if bytes.Equal(l.items[i].k, l.items[i-1].k) {
			return &store.AlreadyExistsError{Relationship: relationshipAt(l.items[i].k)}
		}
	}
	if err := l.checkExisting(); err != nil {
		return err
	}
	if err := l.writeRuns(); err != nil {
		return fmt.Errorf("pebble store: bulk load: %w", err)
	}
	l.chunks = append(l.chunks, [2][]byte{bytes.Clone(l.items[0].k), bytes.Clone(l.items[len(l.items)-1].k)})
	l.items, l.arena = l.items[:0], l.arena[:0]
	return nil
}

// writeRuns writes the chunk's forward versions, reverse versions and expiration log
// entries as sorted tables, one run of each kind. The reverse table is built on a
// second goroutine while this one writes the forward table.
func (l *bulkLoad) writeRuns() error {
	revDone := make(chan error, 1)
	var revPath string
	go func() {
		var err error
		revPath, err = l.writeReverse()
		revDone <- err
	}()
	var key, val []byte
	fwdPath, err := l.writeTable(len(l.items), func(i int) ([]byte, []byte) {
		key = appendVersion(append(key[:0], l.items[i].k...), l.rev)
		val = append(append(val[:0], 0), l.items[i].v...)
		return key, val
	})
	rerr := <-revDone
	if err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	l.runs[runForward] = append(l.runs[runForward], fwdPath)
	l.runs[runReverse] = append(l.runs[runReverse], revPath)
	l.exp = l.exp[:0]
	for _, it := range l.items {
		exp, err := bodyExpiry(it.v)
		if err != nil {
			return err
		}
		if exp.set {
			l.exp = append(l.exp, expiringKey(exp.sec, exp.nsec, appendVersion(bytes.Clone(it.k), l.rev)))
		}
	}
	if len(l.exp) == 0 {
		return nil
	}
	slices.SortFunc(l.exp, bytes.Compare)
	expPath, err := l.writeTable(len(l.exp), func(i int) ([]byte, []byte) { return l.exp[i], nil })
	if err != nil {
		return err
	}
	l.runs[runExpiring] = append(l.runs[runExpiring], expPath)
	return nil
}

// writeReverse writes the chunk's reverse versions, sorted, as a table.
func (l *bulkLoad) writeReverse() (string, error) {
	l.rev2, l.arena2 = l.rev2[:0], l.arena2[:0]
	for _, it := range l.items {
		fs, ok := parseLogical(it.k[1:])
		if !ok {
			return "", errCorrupt
		}
		at := len(l.arena2)
		l.arena2 = reverseFromFields(l.arena2, &fs, l.rev)
		l.rev2 = append(l.rev2, kv{k: l.arena2[at:len(l.arena2):len(l.arena2)], v: it.v})
	}
	slices.SortFunc(l.rev2, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	var val []byte
	return l.writeTable(len(l.rev2), func(i int) ([]byte, []byte) {
		val = append(append(val[:0], 0), l.rev2[i].v...)
		return l.rev2[i].k, val
	})
}

// writeTable writes n sorted entries to a new table file and returns its path. It
// is safe to call from two goroutines at once.
func (l *bulkLoad) writeTable(n int, at func(i int) (k, v []byte)) (string, error) {
	path, w, err := l.createTable()
	if err != nil {
		return "", err
	}
	for i := range n {
		k, v := at(i)
		if err := w.Set(k, v); err != nil {
			_ = w.Close()
			return path, err
		}
	}
	return path, w.Close()
}

// createTable creates a new table file in the load's folder.
func (l *bulkLoad) createTable() (string, *sstable.Writer, error) {
	path := filepath.Join(l.tmp, fmt.Sprintf("%d-%d.sst", l.rev, l.written.Add(1)))
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "", nil, err
	}
	return path, sstable.NewWriter(objstorageprovider.NewFileWritable(f), l.s.popts.MakeWriterOptions(0, l.s.db.TableFormat())), nil
}

// checkExisting fails if a relationship of the chunk has a live version already (one
// that an earlier chunk of this load also has is found when the runs are merged).
// The chunk is sorted, so the seeks move forward through the database.
func (l *bulkLoad) checkExisting() error {
	it, err := l.s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagForward}, UpperBound: []byte{tagForward + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for _, x := range l.items {
		if !it.SeekPrefixGE(x.k) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		deleted, _, err := splitValue(v)
		if err != nil {
			return err
		}
		if deleted == 0 {
			return &store.AlreadyExistsError{Relationship: relationshipAt(x.k)}
		}
	}
	return it.Error()
}

// rollbackBulk removes the versions created at rev within the given forward key spans
// (all of them when spans is nil), then the bulk marker.
func (s *Store) rollbackBulk(rev uint64, spans [][2][]byte) error {
	for _, sp := range mergeSpans(spans) {
		if err := s.removeCreatedAt(rev, sp[0], prefixEnd(sp[1])); err != nil {
			return err
		}
	}
	if err := s.db.Delete(keyBulk, pebble.Sync); err != nil {
		return fmt.Errorf("pebble store: removing a failed bulk load: %w", err)
	}
	return nil
}

// abandonBulkLoad removes the remains of a bulk load that the process did not finish.
func (s *Store) abandonBulkLoad() error {
	if err := os.RemoveAll(filepath.Join(s.dir, bulkTmp)); err != nil {
		return fmt.Errorf("data directory %s: removing an unfinished bulk load: %w", s.dir, err)
	}
	v, ok, err := s.get(keyBulk)
	if err != nil || !ok {
		return err
	}
	if len(v) != 8 {
		return errCorrupt
	}
	all := [][2][]byte{{[]byte{tagForward}, []byte{tagForward}}}
	return s.rollbackBulk(binary.BigEndian.Uint64(v), all)
}

// removeCreatedAt deletes every version created at rev with a forward key in
// [lower, upper), with its reverse and expiration keys, in bounded batches.
func (s *Store) removeCreatedAt(rev uint64, lower, upper []byte) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer func() { _ = b.Close() }()
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		if !versioned(k) || versionOf(k) != rev {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := deleteCreated(b, k, v); err != nil {
			return err
		}
		if b.Len() > 4<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			_ = b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	return b.Commit(pebble.NoSync)
}

// deleteCreated adds the deletion of the version at forward key k with value v.
func deleteCreated(b *pebble.Batch, k, v []byte) error {
	if err := deleteVersion(b, k); err != nil {
		return err
	}
	_, body, err := splitValue(v)
	if err != nil {
		return err
	}
	exp, err := bodyExpiry(body)
	if err != nil {
		return err
	}
	if exp.set {
		_ = b.Delete(expiringKey(exp.sec, exp.nsec, k), nil)
	}
	return nil
}

// mergeSpans sorts forward key spans and joins overlapping ones.
func mergeSpans(spans [][2][]byte) [][2][]byte {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
	var out [][2][]byte
	for _, sp := range spans {
		if n := len(out); n > 0 && bytes.Compare(sp[0], out[n-1][1]) <= 0 {
			if bytes.Compare(sp[1], out[n-1][1]) > 0 {
				out[n-1][1] = sp[1]
			}
			continue
		}
		out = append(out, sp)
	}
	return out
}
