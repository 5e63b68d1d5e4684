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

// sideTable holds the caveats and expirations of the records that have either. Few
// relationships have one, so one uint32 index per record (0: neither) is cheaper than
// an 8-byte expiration in every record, and a table of pointer-holding entries beside
// the pointer-free records costs the garbage collector little.
type sideTable struct {
	entries []sideEntry // entry 0 is unused so that 0 means "no caveat, no expiration"
	free    []uint32
}

// add stores a private copy of c (nil: none) with the encoded expiration (0: never)
// and returns its index, or 0 when there is neither.
func (t *sideTable) add(c *rel.Caveat, expires int64) uint32 {
	if c == nil && expires == 0 {
		return 0
	}
	if len(t.entries) == 0 {
		t.entries = append(t.entries, sideEntry{})
	}
	e := sideEntry{expires: expires}
	if c != nil {
		e.caveat, e.caveated = rel.Caveat{Name: c.Name, Context: copyContext(c.Context)}, true
	}
	if n := len(t.free); n > 0 {
		idx := t.free[n-1]
		t.free = t.free[:n-1]
		t.entries[idx] = e
		return idx
	}
	t.entries = append(t.entries, e)
	return uint32(len(t.entries) - 1)
}

// caveat returns a copy of the caveat at idx that the caller may keep and change, or
// nil when there is none.
func (t *sideTable) caveat(idx uint32) *rel.Caveat {
	if idx == 0 || !t.entries[idx].caveated {
		return nil
	}
	e := t.entries[idx].caveat
	return &rel.Caveat{Name: e.Name, Context: copyContext(e.Context)}
}

// expires returns the encoded expiration at idx; 0: never.
func (t *sideTable) expires(idx uint32) int64 {
	if idx == 0 {
		return 0
	}
	return t.entries[idx].expires
}

// expiredAt reports whether the expiration at idx is at or before now (unix ns).
func (t *sideTable) expiredAt(idx uint32, now int64) bool {
	if idx == 0 {
		return false
	}
	x := t.entries[idx].expires
	return x != 0 && x <= now
}

// same reports whether the entry at idx (0: none) holds caveat c and expiration expires.
func (t *sideTable) same(idx uint32, c *rel.Caveat, expires int64) bool {
	if t.expires(idx) != expires {
		return false
	}
	caveated := idx != 0 && t.entries[idx].caveated
	if !caveated || c == nil {
		return !caveated && c == nil
	}
	e := t.entries[idx].caveat
	return e.Name == c.Name && len(e.Context) == len(c.Context) && reflect.DeepEqual(e.Context, c.Context)
}

func (t *sideTable) release(idx uint32) {
	if idx != 0 {
		t.entries[idx] = sideEntry{}
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
