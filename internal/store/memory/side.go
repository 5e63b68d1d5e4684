package memory

import (
	"maps"
	"reflect"

	"github.com/latch-authz/latch/internal/rel"
)

// caveatTable holds the caveats of caveated records. Few relationships are caveated, so
// a table of pointer-holding entries beside the pointer-free records is cheap.
type caveatTable struct {
	entries []rel.Caveat // entry 0 is unused so that 0 means "no caveat"
	free    []uint32
}

// add stores a private copy of c and returns its index.
func (t *caveatTable) add(c *rel.Caveat) uint32 {
	if len(t.entries) == 0 {
		t.entries = append(t.entries, rel.Caveat{})
	}
	e := rel.Caveat{Name: c.Name, Context: copyContext(c.Context)}
	if n := len(t.free); n > 0 {
		idx := t.free[n-1]
		t.free = t.free[:n-1]
		t.entries[idx] = e
		return idx
	}
	t.entries = append(t.entries, e)
	return uint32(len(t.entries) - 1)
}

// get returns a copy of the caveat at idx that the caller may keep and change.
func (t *caveatTable) get(idx uint32) *rel.Caveat {
	e := t.entries[idx]
	return &rel.Caveat{Name: e.Name, Context: copyContext(e.Context)}
}

// equal reports whether the caveat at idx (0: none) is c.
func (t *caveatTable) equal(idx uint32, c *rel.Caveat) bool {
	if idx == 0 || c == nil {
		return idx == 0 && c == nil
	}
	e := t.entries[idx]
	return e.Name == c.Name && len(e.Context) == len(c.Context) && reflect.DeepEqual(e.Context, c.Context)
}

func (t *caveatTable) release(idx uint32) {
	if idx != 0 {
		t.entries[idx] = rel.Caveat{}
		t.free = append(t.free, idx)
	}
}

// copyContext deep-copies a caveat context built of JSON-like values (maps, slices,
// scalars), so the store never shares mutable state with its callers.
func copyContext(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return copyContext(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	case []string:
		return append([]string(nil), x...)
	case map[string]string:
		return maps.Clone(x)
	default:
		return v
	}
}

// expiry is a record with an expiration, for the collector's heap.
type expiry struct {
	at  int64
	rec uint32
}

// expiryHeap is a min-heap of expiring records by expiration, so garbage collection
// finds the records that expired longer ago than the window without scanning every
// record. Entries go stale when their record is deleted first; the collector skips
// those.
type expiryHeap []expiry

func (h *expiryHeap) push(e expiry) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].at <= a[i].at {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *expiryHeap) pop() expiry {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(a) && a[l].at < a[small].at {
			small = l
		}
		if r < len(a) && a[r].at < a[small].at {
			small = r
		}
		if small == i {
			break
		}
		a[i], a[small] = a[small], a[i]
		i = small
	}
	*h = a
	return top
}
