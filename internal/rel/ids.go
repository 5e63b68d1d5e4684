package rel

import (
	"encoding/binary"
	"slices"
	"strings"
)

// SortIDs sorts ids as slices.Sort does.
func SortIDs(ids []string) {
	if len(ids) < OrderMin {
		slices.Sort(ids)
		return
	}
	SortBy(ids, func(i int) string { return ids[i] }, nil)
}

// SortBy sorts items in the order order gives them; id and tie name items by their
// positions before the sort.
func SortBy[T any](items []T, id func(int) string, tie func(a, b int) int) {
	orig := slices.Clone(items)
	for i, at := range order(len(items), id, tie) {
		items[i] = orig[at]
	}
}

// OrderMin is how many items are worth SortBy's passes; fewer sort faster compared.
const OrderMin = 256

// order returns the positions 0 to n-1 of n items ordered by their ids (id(i)), as
// strings are ordered, and by tie (when not nil) where ids are equal. Many items are
// sorted by the first eight bytes of their ids read as a number, with a radix sort of
// the bytes in which they differ, then by the rest where those tie: short ids (`u1234`)
// rarely tie, and a pass of a radix sort costs less than one of a comparison sort's
// many string comparisons. The sort moves numbers, no pointers: it costs the garbage
// collector nothing.
func order(n int, id func(int) string, tie func(a, b int) int) []uint32 {
	keyed := make([]keyedID, n)
	var anyOne, allOnes uint64 = 0, ^uint64(0)
	for i := range n {
		var b [8]byte
		copy(b[:], id(i))
		p := binary.BigEndian.Uint64(b[:])
		keyed[i] = keyedID{p, uint32(i)}
		anyOne, allOnes = anyOne|p, allOnes&p
	}
	keyed = radixSort(keyed, anyOne^allOnes)
	for i := 0; i < n; {
		j := i + 1
		for j < n && keyed[j].prefix == keyed[i].prefix {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keyed[i:j], func(a, b keyedID) int {
				if c := strings.Compare(id(int(a.at)), id(int(b.at))); c != 0 || tie == nil {
					return c
				}
				return tie(int(a.at), int(b.at))
			})
		}
		i = j
	}
	out := make([]uint32, n)
	for i, k := range keyed {
		out[i] = k.at
	}
	return out
}

// radixSort sorts keyed by prefix, least significant byte first, skipping the bytes in
// which no prefix differs (varies has the bits that differ), and returns the sorted
// slice: keyed or one of the same length.
func radixSort(keyed []keyedID, varies uint64) []keyedID {
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
	return keyed
}

// keyedID is the position of an id with its first eight bytes as a number (zeros
// past its end), which orders ids as their bytes do wherever it differs.
type keyedID struct {
	prefix uint64
	at     uint32
}
