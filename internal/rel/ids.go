package rel

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
)

// SortIDs sorts ids as slices.Sort does. Many ids are sorted by their first eight
// bytes read as a number, then by the rest where those tie: comparing numbers costs
// a tenth of comparing strings, and short ids (`u1234`) rarely tie.
func SortIDs(ids []string) {
	if len(ids) < 256 {
		slices.Sort(ids)
		return
	}
	keyed := make([]keyedID, len(ids))
	for i, id := range ids {
		var b [8]byte
		copy(b[:], id)
		keyed[i] = keyedID{binary.BigEndian.Uint64(b[:]), id}
	}
	slices.SortFunc(keyed, func(a, b keyedID) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		return strings.Compare(a.id, b.id)
	})
	for i := range keyed {
		ids[i] = keyed[i].id
	}
}

// keyedID is an id with its first eight bytes as a number (zeros past its end), which
// orders ids as their bytes do wherever it differs.
type keyedID struct {
	prefix uint64
	id     string
}
