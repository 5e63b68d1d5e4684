package rel

import (
	"encoding/binary"
	"slices"
	"strings"
)

// SortIDs sorts ids as slices.Sort does. Many ids are sorted by their first eight
// bytes read as a number, with a radix sort of the bytes in which they differ, then
// by the rest where those tie: short ids (`u1234`) rarely tie, and a pass of a radix
// sort costs less than one of a comparison sort's many string comparisons.
func SortIDs(ids []string) {
	if len(ids) < 256 {
		slices.Sort(ids)
		return
	}
	// The sort moves prefixes and positions, no pointers: it costs the garbage
	// collector nothing.
	keyed := make([]keyedID, len(ids))
	var anyOne, allOnes uint64 = 0, ^uint64(0)
	for i, id := range ids {
		var b [8]byte
		copy(b[:], id)
		p := binary.BigEndian.Uint64(b[:])
		keyed[i] = keyedID{p, uint32(i)}
		anyOne, allOnes = anyOne|p, allOnes&p
	}
	// Least significant byte first, skipping the bytes every prefix has alike.
	varies := anyOne ^ allOnes
	spare := make([]keyedID, len(keyed))
	for shift := 0; shift < 64; shift += 8 {
		if varies>>shift&0xff == 0 {
			continue
		}
		var at [256]int
		for _, k := range keyed {
			at[k.prefix>>shift&0xff]++
		}
		pos := 0
		for b, n := range at {
			at[b], pos = pos, pos+n
		}
		for _, k := range keyed {
			b := k.prefix >> shift & 0xff
			spare[at[b]] = k
			at[b]++
		}
		keyed, spare = spare, keyed
	}
	orig := slices.Clone(ids)
	for i := 0; i < len(keyed); {
		j := i + 1
		for j < len(keyed) && keyed[j].prefix == keyed[i].prefix {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keyed[i:j], func(a, b keyedID) int { return strings.Compare(orig[a.at], orig[b.at]) })
		}
		i = j
	}
	for i, k := range keyed {
		ids[i] = orig[k.at]
	}
}

// keyedID is the position of an id with its first eight bytes as a number (zeros
// past its end), which orders ids as their bytes do wherever it differs.
type keyedID struct {
	prefix uint64
	at     uint32
}
