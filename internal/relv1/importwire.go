package relv1

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/latch-authz/latch/internal/rel"
)

// FromImportRequest reads the bytes of an ImportBulkRelationshipsRequest (or of the
// experimental BulkImportRelationshipsRequest, alike on the wire) straight into
// relationships, with one string allocation per relationship where the generated code
// makes nine objects. It takes the shape nearly every import has: each field at most
// once, no caveat, no expiration, no unknown field, and relationships that
// rel.Validate accepts. ok is false for anything else, which the caller decodes with
// the generated code.
func FromImportRequest(b []byte) (rels []rel.Relationship, ok bool) {
	rels = make([]rel.Relationship, 0, len(b)/48)
	for len(b) > 0 {
		num, start, end := nextField(b)
		if num != 1 {
			return nil, false
		}
		r, ok := decodeRelationship(string(b[start:end])) // the one allocation
		if !ok || rel.Validate(r) != nil {
			return nil, false
		}
		rels = append(rels, r)
		b = b[end:]
	}
	return rels, true
}

// decodeRelationship decodes a Relationship without a caveat or an expiration; its
// strings are substrings of s.
func decodeRelationship(s string) (r rel.Relationship, ok bool) {
	ok = wireStrings(s, 3, func(num uint64, v string) bool {
		switch num {
		case 1:
			return decodeObject(v, &r.Resource)
		case 2:
			r.Relation = v
			return true
		default:
			return wireStrings(v, 2, func(num uint64, v string) bool {
				if num == 1 {
					return decodeObject(v, &r.Subject.Object)
				}
				r.Subject.Relation = v
				return true
			})
		}
	})
	return r, ok
}

// decodeObject decodes an ObjectReference.
func decodeObject(s string, o *rel.ObjectRef) bool {
	return wireStrings(s, 2, func(num uint64, v string) bool {
		if num == 1 {
			o.Type = v
		} else {
			o.ID = v
		}
		return true
	})
}

// wireStrings calls f with the value of each field of message s. Every field must be
// length-delimited, numbered 1 to last and present at most once.
func wireStrings(s string, last uint64, f func(num uint64, v string) bool) bool {
	var seen uint64
	for len(s) > 0 {
		num, start, end := nextField(s)
		if num < 1 || num > last || seen&(1<<num) != 0 || !f(num, s[start:end]) {
			return false
		}
		seen |= 1 << num
		s = s[end:]
	}
	return true
}

// nextField reads the length-delimited field b starts with: its number and where its
// value starts and ends. num is 0 when b does not start with one.
func nextField[T string | []byte](b T) (num uint64, start, end int) {
	tag, n := uvarint(b)
	if n < 0 || tag&7 != uint64(protowire.BytesType) {
		return 0, 0, 0
	}
	l, m := uvarint(b[n:])
	if m < 0 || l > uint64(len(b)-n-m) {
		return 0, 0, 0
	}
	start = n + m
	return tag >> 3, start, start + int(l)
}

// uvarint reads the varint b starts with and its length; n < 0 when there is none, or
// one that overflows 64 bits (which the generated code refuses too).
func uvarint[T string | []byte](b T) (v uint64, n int) {
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			break
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, -1
}
