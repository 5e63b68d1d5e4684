package relv1

import (
	"unicode/utf8"

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
func decodeObject(s string, o *rel.ObjectRef) bool { return objectFields(s, &o.Type, &o.ID) }

// objectFields decodes the type and id of an ObjectReference into typ and id, each
// valid UTF-8 as the generated code requires.
func objectFields(s string, typ, id *string) bool {
	return wireStrings(s, 2, func(num uint64, v string) bool {
		if num == 1 {
			*typ = v
		} else {
			*id = v
		}
		return utf8.ValidString(v)
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

// AppendImportRequest appends to dst the bytes of an ImportBulkRelationshipsRequest of
// rels, as the generated code would write them, for the shape FromImportRequest reads:
// ok is false, and dst unchanged, when one has a caveat or an expiration, which the
// caller encodes with the generated code.
func AppendImportRequest(dst []byte, rels []rel.Relationship) (out []byte, ok bool) {
	out = dst
	for i := range rels {
		r := &rels[i]
		if r.Caveat != nil || r.Expiration != nil {
			return dst, false
		}
		subject := sizeOf(1, objectSize(r.Subject.Object)) + stringSize(2, r.Subject.Relation)
		size := sizeOf(1, objectSize(r.Resource)) + stringSize(2, r.Relation) + sizeOf(3, subject)
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(size))
		out = appendObject(out, 1, r.Resource)
		out = appendString(out, 2, r.Relation)
		out = protowire.AppendTag(out, 3, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(subject))
		out = appendObject(out, 1, r.Subject.Object)
		out = appendString(out, 2, r.Subject.Relation)
	}
	return out, true
}

// objectSize is the size of ObjectReference o's fields.
func objectSize(o rel.ObjectRef) int { return stringSize(1, o.Type) + stringSize(2, o.ID) }

// sizeOf is the size of field num holding n bytes.
func sizeOf(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// stringSize is the size of string field num holding s: none when s is empty, which
// proto3 does not write.
func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return sizeOf(num, len(s))
}

// appendObject appends ObjectReference o as field num.
func appendObject(b []byte, num protowire.Number, o rel.ObjectRef) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(objectSize(o)))
	return appendString(appendString(b, 1, o.Type), 2, o.ID)
}

// appendString appends string field num, unless s is empty.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
