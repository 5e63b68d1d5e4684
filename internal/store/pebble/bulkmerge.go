package pebble

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/latch-authz/latch/internal/store"
)

// A chunk's tables cover the whole key range its relationships fall in, which for
// most imports is the whole key space: ingested chunk by chunk, nearly every table
// overlapped the ones before it and went into L0, and Pebble spent the load and the
// minutes after it compacting (14M relationships: 104 of 110 tables into L0, 1.7 GB
// written by compactions during the load, and read amplification 10 to 14 and 600 MB
// of compaction debt on 500 MB of data when it returned). So a load keeps each
// chunk's tables as sorted runs and, at its end, merges each kind's runs into tables
// that do not overlap, which Pebble ingests at once into the lowest level they fit:
// every key is written twice, and nothing is left to compact.

// mergedTableBytes is about the size at which a merged table is closed and the next
// begun.
const mergedTableBytes = 128 << 20

// ingestRuns merges the runs of each kind and ingests the merged tables, all in one
// ingestion. The kinds are merged at once, each in a goroutine: their keys do not
// overlap, and a merge is one stream of reads, comparisons and compression that the
// load's caller waits for. A relationship in two chunks is found here: the forward
// runs then hold the same key twice.
func (l *bulkLoad) ingestRuns(ctx context.Context) error {
	var merged [numRunKinds][]string
	var errs [numRunKinds]error
	var wg sync.WaitGroup
	for kind, runs := range l.runs {
		wg.Go(func() { merged[kind], errs[kind] = l.merge(ctx, runs, kind == runForward) })
	}
	wg.Wait()
	var paths []string
	for kind, err := range errs {
		if _, dup := errors.AsType[*store.AlreadyExistsError](err); dup {
			return err // as a duplicate within a chunk is reported
		}
		if err != nil {
			return fmt.Errorf("pebble store: bulk load: %w", err)
		}
		paths = append(paths, merged[kind]...)
	}
	if len(paths) == 0 {
		return nil
	}
	if err := l.s.db.Ingest(ctx, paths); err != nil {
		return fmt.Errorf("pebble store: bulk load: %w", err)
	}
	l.spans = l.chunks
	return nil
}

// merge merges sorted runs into tables of about mergedTableBytes, removes the runs
// and returns the tables' paths. A single run is already such a table. With unique, a
// key in two runs fails the merge with AlreadyExistsError.
func (l *bulkLoad) merge(ctx context.Context, runs []string, unique bool) ([]string, error) {
	if len(runs) == 1 {
		return runs, nil
	}
	h := &runHeap{cmp: l.s.popts.Comparer.Compare}
	defer func() {
		for _, r := range h.runs {
			r.close()
		}
		for _, p := range runs {
			_ = os.Remove(p)
		}
	}()
	for _, p := range runs {
		r, err := l.openRun(p)
		if err != nil {
			return nil, err
		}
		if r.key == nil {
			r.close()
			continue
		}
		h.runs = append(h.runs, r)
	}
	heap.Init(h)
	var out []string
	var w *sstable.Writer
	var path string
	closeTable := func() error {
		if w == nil {
			return nil
		}
		err := w.Close()
		w = nil
		out = append(out, path)
		return err
	}
	var last []byte // with unique, the key written last
	for n := 0; len(h.runs) > 0; n++ {
		if n%bulkChunk == 0 {
			if err := ctx.Err(); err != nil {
				_ = closeTable()
				return out, err
			}
		}
		r := h.runs[0]
		if unique && last != nil && h.cmp(r.key, last) == 0 {
			_ = closeTable()
			return out, &store.AlreadyExistsError{Relationship: relationshipAt(r.key[:len(r.key)-suffixLen])}
		}
		if w == nil {
			var err error
			if path, w, err = l.createTable(); err != nil {
				return out, err
			}
		}
		if err := w.Set(r.key, r.val); err != nil {
			_ = closeTable()
			return out, err
		}
		if unique {
			last = append(last[:0], r.key...)
		}
		if w.Raw().EstimatedSize() >= mergedTableBytes {
			if err := closeTable(); err != nil {
				return out, err
			}
		}
		if err := r.next(); err != nil {
			_ = closeTable()
			return out, err
		}
		if r.key == nil {
			r.close()
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	return out, closeTable()
}

// runReader reads one sorted run, an entry at a time.
type runReader struct {
	r        *sstable.Reader
	it       sstable.Iterator
	key, val []byte // the current entry; key is nil past the last one
}

func (l *bulkLoad) openRun(path string) (*runReader, error) {
	f, err := vfs.Default.Open(path)
	if err != nil {
		return nil, err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	rd, err := sstable.NewReader(context.Background(), readable, l.s.popts.MakeReaderOptions())
	if err != nil {
		_ = readable.Close()
		return nil, err
	}
	it, err := rd.NewIter(sstable.NoTransforms, nil, nil, sstable.TableBlobContext{})
	if err != nil {
		_ = rd.Close()
		return nil, err
	}
	r := &runReader{r: rd, it: it}
	kv := it.First()
	if kv == nil {
		return r, it.Error()
	}
	r.key = kv.K.UserKey
	r.val, _, err = kv.V.Value(nil)
	return r, err
}

// next moves to the run's next entry.
func (r *runReader) next() error {
	kv := r.it.Next()
	if kv == nil {
		r.key, r.val = nil, nil
		return r.it.Error()
	}
	r.key = kv.K.UserKey
	var err error
	r.val, _, err = kv.V.Value(nil)
	return err
}

func (r *runReader) close() {
	_ = r.it.Close()
	_ = r.r.Close()
}

// runHeap orders runs by their current keys.
type runHeap struct {
	runs []*runReader
	cmp  func(a, b []byte) int
}

func (h *runHeap) Len() int           { return len(h.runs) }
func (h *runHeap) Less(i, j int) bool { return h.cmp(h.runs[i].key, h.runs[j].key) < 0 }
func (h *runHeap) Swap(i, j int)      { h.runs[i], h.runs[j] = h.runs[j], h.runs[i] }
func (h *runHeap) Push(x any)         { h.runs = append(h.runs, x.(*runReader)) }

func (h *runHeap) Pop() any {
	r := h.runs[len(h.runs)-1]
	h.runs = h.runs[:len(h.runs)-1]
	return r
}
