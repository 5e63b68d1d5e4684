package pebble

import (
	"bytes"
	"encoding/binary"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/latch-authz/latch/internal/rel"
)

// Key layout. Every key starts with a one-byte tag naming its keyspace.
//
//	f <resType>0 <resID>0 <relation>0 <subjType>0 <subjID>0 <subjRel>0 <^created:8> 9   forward index
//	r <subjType>0 <subjID>0 <resType>0 <relation>0 <resID>0 <subjRel>0 <^created:8> 9   reverse index
//	g <deleted:8> <forward key>              versions ended at a revision (for GC)
//	x <expires:12> <forward key>             versions that expire (for GC)
//	c <rev:8>                                commit time of a revision (unix ns)
//	s <^rev:8>                               schema text written at a revision
//	m <name>                                 metadata: format, head, oldest, bulk
//	k <name>0                                relationship counter: its filter's stored form
//
// Each relationship version lives at a forward and a reverse key with the same value.
// The part before the version suffix (the "logical key") is six NUL-terminated fields;
// ids never contain NUL, so the encoding is prefix-free and byte order equals the
// tuple order of store.CompareKeys. The version suffix holds the complemented creating
// revision, so the newest version of a relationship sorts first, then a final byte 9
// (the suffix's length) that lets Split tell a versioned key from a bare logical key,
// which ends in NUL.
//
// The reverse index orders a subject's relationships by resource type, relation,
// resource id, subject relation: within one (subject, resource type, relation) that is
// the forward order, so queries by subject merge such runs instead of sorting.
//
// A counter key ends in NUL, so that whatever bytes a counter's name holds, the key
// never ends like a versioned one. Versions of latch that know no counters never read
// the k keyspace, so adding it left the format unchanged.
const (
	tagForward  = 'f'
	tagReverse  = 'r'
	tagEnded    = 'g'
	tagExpiring = 'x'
	tagCommit   = 'c'
	tagSchema   = 's'
	tagMeta     = 'm'
	tagCounter  = 'k'

	suffixLen    = 9
	suffixMarker = 9
)

var (
	keyFormat = metaKey("format")
	keyHead   = metaKey("head")
	keyOldest = metaKey("oldest")
	// keyBulk names the revision of a bulk load in progress, whose versions must be
	// removed if the process stops before the load commits.
	keyBulk = metaKey("bulk")
)

func metaKey(name string) []byte { return append([]byte{tagMeta}, name...) }

// versioned reports whether k ends in a version suffix after a NUL-terminated
// logical key. It looks only at the tail, as Pebble requires of Split (it may split
// keys whose leading bytes were removed). Besides forward and reverse keys, the GC
// logs' keys (which end in a forward version key) qualify; no other key does.
func versioned(k []byte) bool {
	n := len(k)
	return n > suffixLen && k[n-1] == suffixMarker && k[n-suffixLen-1] == 0
}

// split returns the length of k's logical part: the whole key unless k is versioned.
func split(k []byte) int {
	if versioned(k) {
		return len(k) - suffixLen
	}
	return len(k)
}

// comparer orders keys by logical key, then version suffix. On every key the store
// writes that is plain byte order (logical keys are prefix-free), so each layout
// above sorts as documented; comparing the parts separately keeps the order valid on
// the truncated keys Pebble may form. Splitting versions from logical keys gives
// prefix bloom filters to the existence checks of writes and bulk loads.
var comparer = func() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Name = "latch.v1"
	c.Split = split
	c.Compare = compareKeys
	c.Equal = bytes.Equal
	c.AbbreviatedKey = func(k []byte) uint64 {
		return pebble.DefaultComparer.AbbreviatedKey(k[:split(k)])
	}
	// Keep index separators whole: a shortened separator need not be well formed
	// under split.
	c.Separator = func(dst, a, _ []byte) []byte { return append(dst, a...) }
	c.Successor = func(dst, a []byte) []byte { return append(dst, a...) }
	c.ImmediateSuccessor = func(dst, a []byte) []byte { return append(append(dst, a...), 0) }
	return &c
}()

func compareKeys(a, b []byte) int {
	an, bn := split(a), split(b)
	if c := bytes.Compare(a[:an], b[:bn]); c != 0 {
		return c
	}
	return bytes.Compare(a[an:], b[bn:])
}

// fields are the six strings of a relationship key in forward (key) order.
type fields [6][]byte

const (
	fResType = iota
	fResID
	fRelation
	fSubjType
	fSubjID
	fSubjRel
)

// reverseOrder lists, for each position of a reverse key, the forward field there.
var reverseOrder = [6]int{fSubjType, fSubjID, fResType, fRelation, fResID, fSubjRel}

func keyStrings(k rel.Key) [6]string {
	return [6]string{k.ResourceType, k.ResourceID, k.Relation, k.SubjectType, k.SubjectID, k.SubjectRelation}
}

// appendForward appends the forward logical key of k.
func appendForward(dst []byte, k rel.Key) []byte {
	dst = append(dst, tagForward)
	for _, s := range keyStrings(k) {
		dst = append(append(dst, s...), 0)
	}
	return dst
}

// appendReverse appends the reverse logical key of k.
func appendReverse(dst []byte, k rel.Key) []byte {
	s := keyStrings(k)
	dst = append(dst, tagReverse)
	for _, i := range reverseOrder {
		dst = append(append(dst, s[i]...), 0)
	}
	return dst
}

// appendVersion appends the version suffix for a version created at rev.
func appendVersion(dst []byte, created uint64) []byte {
	return append(binary.BigEndian.AppendUint64(dst, ^created), suffixMarker)
}

// versionOf returns the creating revision of a versioned key.
func versionOf(k []byte) uint64 {
	return ^binary.BigEndian.Uint64(k[len(k)-suffixLen:])
}

// parseLogical splits a logical key (tag excluded, terminators included) into its six
// fields in stored order. It fails on anything else.
func parseLogical(logical []byte) (out fields, ok bool) {
	for i := range out {
		j := bytes.IndexByte(logical, 0)
		if j < 0 {
			return out, false
		}
		out[i], logical = logical[:j], logical[j+1:]
	}
	return out, len(logical) == 0
}

// parseVersioned returns the forward-order fields of a versioned forward or reverse
// key and its creating revision.
func parseVersioned(k []byte) (fields, uint64, bool) {
	if !versioned(k) || k[0] != tagForward && k[0] != tagReverse {
		return fields{}, 0, false
	}
	stored, ok := parseLogical(k[1 : len(k)-suffixLen])
	if !ok {
		return fields{}, 0, false
	}
	if k[0] == tagForward {
		return stored, versionOf(k), true
	}
	var out fields
	for pos, i := range reverseOrder {
		out[i] = stored[pos]
	}
	return out, versionOf(k), true
}

// relKey turns fields into a rel.Key. One string holds all six, so decoding a
// relationship costs one allocation for its names.
func relKey(f *fields) rel.Key {
	n := 0
	for _, b := range f {
		n += len(b)
	}
	buf := make([]byte, 0, n)
	for _, b := range f {
		buf = append(buf, b...)
	}
	all := string(buf)
	var out [6]string
	at := 0
	for i, b := range f {
		out[i] = all[at : at+len(b)]
		at += len(b)
	}
	return rel.Key{
		ResourceType: out[0], ResourceID: out[1], Relation: out[2],
		SubjectType: out[3], SubjectID: out[4], SubjectRelation: out[5],
	}
}

// reverseFromFields appends the reverse version key of f created at rev.
func reverseFromFields(dst []byte, f *fields, created uint64) []byte {
	dst = append(dst, tagReverse)
	for _, i := range reverseOrder {
		dst = append(append(dst, f[i]...), 0)
	}
	return appendVersion(dst, created)
}

func commitKey(rev uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tagCommit}, rev)
}

func schemaKey(rev uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tagSchema}, ^rev)
}

func counterKey(name string) []byte {
	return append(append([]byte{tagCounter}, name...), 0)
}

func endedKey(deleted uint64, fwdVersion []byte) []byte {
	k := make([]byte, 0, 9+len(fwdVersion))
	k = append(k, tagEnded)
	k = binary.BigEndian.AppendUint64(k, deleted)
	return append(k, fwdVersion...)
}

// expiringKey orders versions by expiration (seconds with the sign bit flipped, so
// negative times sort first, then nanoseconds).
func expiringKey(sec int64, nsec uint32, fwdVersion []byte) []byte {
	k := make([]byte, 0, 13+len(fwdVersion))
	k = append(k, tagExpiring)
	k = binary.BigEndian.AppendUint64(k, uint64(sec)^(1<<63))
	k = binary.BigEndian.AppendUint32(k, nsec)
	return append(k, fwdVersion...)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // no upper bound
}

// hasNUL reports whether any of ss contains a NUL byte, which no stored name can.
func hasNUL(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
	return false
}
