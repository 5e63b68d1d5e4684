package crdb

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/latch-authz/latch/internal/store"
)

// HLC is a CockroachDB hybrid logical clock timestamp: wall time in nanoseconds since
// the Unix epoch and a logical counter ordering events within one wall time.
type HLC struct {
	WallNanos int64
	Logical   int32
}

// Less orders timestamps.
func (h HLC) Less(o HLC) bool {
	return h.WallNanos < o.WallNanos || h.WallNanos == o.WallNanos && h.Logical < o.Logical
}

// String renders h as CockroachDB's decimal form, `wall.logical` with ten logical
// digits, the form cluster_logical_timestamp() returns and AS OF SYSTEM TIME accepts.
func (h HLC) String() string { return fmt.Sprintf("%d.%010d", h.WallNanos, h.Logical) }

// ParseHLC reads the decimal form of an HLC timestamp.
func ParseHLC(s string) (HLC, error) {
	wall, frac, _ := strings.Cut(s, ".")
	w, err := strconv.ParseInt(wall, 10, 64)
	if err != nil || w < 0 {
		return HLC{}, fmt.Errorf("HLC timestamp %q: wall time is not a non-negative integer", s)
	}
	if len(frac) > 10 {
		return HLC{}, fmt.Errorf("HLC timestamp %q: more than ten logical digits", s)
	}
	frac += strings.Repeat("0", 10-len(frac))
	l, err := strconv.ParseInt(frac, 10, 64)
	if err != nil || l > math.MaxInt32 {
		return HLC{}, fmt.Errorf("HLC timestamp %q: logical part is not a 32-bit counter", s)
	}
	return HLC{WallNanos: w, Logical: int32(l)}, nil
}

// A store.Revision packs an HLC timestamp into 64 bits: the wall time in nanoseconds
// since revisionEpoch in the high 61 bits and the logical counter in the low 3. A
// logical counter of 7 or more saturates at 7, which stands for "any logical value at
// that wall time": decoding it reads at the largest logical value, so a read at the
// revision of a write always sees the write. Encoding preserves order (it never
// inverts two timestamps), and distinct commits get distinct revisions unless they
// share a wall nanosecond and both have logical counters of 7 or more, which
// CockroachDB produces only under extreme clock contention; such commits share one
// revision, which reads see whole. The wall range lasts until the year 2093.
const (
	logicalBits = 3
	logicalMax  = 1<<logicalBits - 1
)

// revisionEpoch is 2020-01-01T00:00:00Z in Unix nanoseconds.
var revisionEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

var errHLCRange = errors.New("HLC timestamp is outside the range a revision can encode (2020 to 2093)")

// EncodeRevision packs h into a revision.
func EncodeRevision(h HLC) (store.Revision, error) {
	if h.WallNanos < revisionEpoch || h.Logical < 0 {
		return 0, fmt.Errorf("%w: %s", errHLCRange, h)
	}
	wall := uint64(h.WallNanos - revisionEpoch)
	if wall >= 1<<(64-logicalBits) {
		return 0, fmt.Errorf("%w: %s", errHLCRange, h)
	}
	return store.Revision(wall<<logicalBits | uint64(min(h.Logical, logicalMax))), nil
}

// DecodeRevision returns the timestamp a read at rev reads at.
func DecodeRevision(rev store.Revision) HLC {
	h := HLC{WallNanos: int64(uint64(rev)>>logicalBits) + revisionEpoch, Logical: int32(rev & logicalMax)}
	if h.Logical == logicalMax {
		h.Logical = math.MaxInt32
	}
	return h
}

// asOf is the AS OF SYSTEM TIME clause reading at rev. The timestamp is a literal
// made of digits only, so it cannot inject anything.
func asOf(rev store.Revision) string {
	return "AS OF SYSTEM TIME '" + DecodeRevision(rev).String() + "'"
}
