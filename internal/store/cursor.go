package store

import (
	"encoding/base64"
	"encoding/binary"

	"github.com/latch-authz/latch/internal/rel"
)

// cursorVersion is the first byte of every decoded cursor, so that a later encoding can
// tell old cursors apart.
const cursorVersion = 1

// CursorCodec encodes and decodes the cursors of one query. A cursor holds the key of the
// last relationship returned and a fingerprint of the filter, so that a cursor handed to
// a query with another filter is refused rather than silently skipping results. It is
// shared by the backends so that their cursors agree.
type CursorCodec struct{ fingerprint uint32 }

// NewCursorCodec returns the codec for queries with filter f.
func NewCursorCodec(f Filter) CursorCodec {
	return CursorCodec{fingerprint: fingerprint(f)}
}

// LazyCursorCodec is a query's codec, made at its first use: most of the queries a
// check makes yield nothing and need no cursor. The zero value is ready to use.
type LazyCursorCodec struct {
	codec CursorCodec
	made  bool
}

// Of returns the codec of f, which must be the same filter at every call.
func (l *LazyCursorCodec) Of(f *Filter) CursorCodec {
	if !l.made {
		l.codec, l.made = NewCursorCodec(*f), true
	}
	return l.codec
}

// Encode returns the cursor resuming strictly after k. The cursor is URL-safe base64.
func (c CursorCodec) Encode(k rel.Key) Cursor {
	var stack [192]byte
	raw := append(stack[:0], cursorVersion)
	raw = binary.LittleEndian.AppendUint32(raw, c.fingerprint)
	for _, s := range keyFields(&k) {
		raw = binary.AppendUvarint(raw, uint64(len(*s)))
		raw = append(raw, *s...)
	}
	var out [256]byte
	enc := base64.RawURLEncoding
	if n := enc.EncodedLen(len(raw)); n > len(out) {
		return Cursor(enc.EncodeToString(raw))
	}
	dst := out[:enc.EncodedLen(len(raw))]
	enc.Encode(dst, raw)
	return Cursor(dst)
}

// Decode returns the key a cursor resumes after. It fails with ErrInvalidCursor when the
// cursor is malformed or was issued for another filter.
func (c CursorCodec) Decode(cur Cursor) (rel.Key, error) {
	var k rel.Key
	raw, err := base64.RawURLEncoding.DecodeString(string(cur))
	if err != nil || len(raw) < 5 || raw[0] != cursorVersion {
		return k, ErrInvalidCursor
	}
	if binary.LittleEndian.Uint32(raw[1:5]) != c.fingerprint {
		return k, ErrInvalidCursor
	}
	raw = raw[5:]
	for _, s := range keyFields(&k) {
		n, w := binary.Uvarint(raw)
		if w <= 0 || n > uint64(len(raw)-w) {
			return k, ErrInvalidCursor
		}
		*s = string(raw[w : w+int(n)])
		raw = raw[w+int(n):]
	}
	if len(raw) != 0 {
		return k, ErrInvalidCursor
	}
	return k, nil
}

func keyFields(k *rel.Key) [6]*string {
	return [6]*string{&k.ResourceType, &k.ResourceID, &k.Relation, &k.SubjectType, &k.SubjectID, &k.SubjectRelation}
}

// fingerprint hashes every field of f. Id lists hash as sets (a sum of per-id hashes)
// so that the order a caller lists ids in does not invalidate its cursors.
func fingerprint(f Filter) uint32 {
	h := fnvString(fnvOffset, f.ResourceType)
	h = fnvString(h, f.ResourceIDPrefix)
	h = fnvString(h, f.Relation)
	h = fnvUint(h, idSetHash(f.ResourceIDs))
	if f.IncludeExpired {
		h = fnvUint(h, 1)
	}
	if s := f.Subject; s != nil {
		h = fnvUint(h, 2)
		h = fnvString(h, s.Type)
		h = fnvUint(h, idSetHash(s.IDs))
		if s.RelationSet {
			h = fnvString(fnvUint(h, 3), s.Relation)
		}
	}
	return h
}

func idSetHash(ids []string) uint32 {
	var sum uint32
	for _, id := range ids {
		sum += fnvString(fnvOffset, id)
	}
	return sum
}

const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// fnvString mixes s and a terminator into h (FNV-1a), so that adjacent fields cannot
// run into each other.
func fnvString(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * fnvPrime
	}
	return (h ^ 0xff) * fnvPrime
}

func fnvUint(h, v uint32) uint32 {
	for range 4 {
		h = (h ^ (v & 0xff)) * fnvPrime
		v >>= 8
	}
	return h
}
