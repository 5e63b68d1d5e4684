package memory

import (
	"maps"
	"reflect"

	"github.com/latch-authz/latch/internal/rel"
)

// sideEntry is what a record keeps beside it: its caveat and its expiration.
type sideEntry struct {
	caveat   rel.Caveat
	caveated bool
	expires  int64 // unix nanoseconds; 0: never expires
}

// sideTable holds the caveats and expirations of the records that have either, by
// record index. Few relationships have one, so a sparse table beside the records is
// cheaper than room for them in every record (a record says whether it has an entry:
// record.hasSide), and its pointer-holding entries beside the pointer-free records
// cost the garbage collector little.
type sideTable struct {
	entries map[uint32]sideEntry
}

// add stores for record idx a private copy of c (nil: none) with the encoded
// expiration (0: never), and reports whether there was either to store.
func (t *sideTable) add(idx uint32, c *rel.Caveat, expires int64) bool {
	if c == nil && expires == 0 {
		return false
	}
	e := sideEntry{expires: expires}
	if c != nil {
		e.caveat, e.caveated = rel.Caveat{Name: c.Name, Context: copyContext(c.Context)}, true
	}
	if t.entries == nil {
		t.entries = map[uint32]sideEntry{}
	}
	t.entries[idx] = e
	return true
}

// caveat returns a copy of record idx's caveat that the caller may keep and change, or
// nil when it has none.
func (t *sideTable) caveat(idx uint32) *rel.Caveat {
	e, ok := t.entries[idx]
	if !ok || !e.caveated {
		return nil
	}
	return &rel.Caveat{Name: e.caveat.Name, Context: copyContext(e.caveat.Context)}
}

// expires returns record idx's encoded expiration; 0: never.
func (t *sideTable) expires(idx uint32) int64 { return t.entries[idx].expires }

// same reports whether record idx holds caveat c and expiration expires.
func (t *sideTable) same(idx uint32, c *rel.Caveat, expires int64) bool {
	e := t.entries[idx]
	if e.expires != expires {
		return false
	}
	if !e.caveated || c == nil {
		return !e.caveated && c == nil
	}
	return e.caveat.Name == c.Name && len(e.caveat.Context) == len(c.Context) && reflect.DeepEqual(e.caveat.Context, c.Context)
}

func (t *sideTable) release(idx uint32) { delete(t.entries, idx) }

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
