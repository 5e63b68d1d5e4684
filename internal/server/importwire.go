package server

import (
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/rel"
)

// rawMessage is a request the codec leaves undecoded, for a handler that decodes it
// itself: the imports. Its buffer is reused from one message to the next.
type rawMessage struct{ b []byte }

// recvImport receives one import message (ImportBulkRelationshipsRequest, or the
// experimental BulkImportRelationshipsRequest: the two are alike on the wire) into
// raw and returns its relationships, checked as any request's are: its proto rules,
// then relationshipFromWire. On a relationship that fails, it returns the ones before
// it with the error, so that they are loaded (and checked against the schema) in
// order before the error ends the import.
func (s *Server) recvImport(stream grpc.ServerStream, raw *rawMessage) ([]rel.Relationship, error) {
	if err := stream.RecvMsg(raw); err != nil {
		return nil, err
	}
	if rels, ok := decodeImport(raw.b); ok {
		return rels, nil
	}
	return s.decodeImportGenerated(raw.b)
}

// decodeImportGenerated decodes any import message with the generated code, returning
// the relationships before the first that fails its checks with the error.
func (s *Server) decodeImportGenerated(b []byte) ([]rel.Relationship, error) {
	req := new(v1.ImportBulkRelationshipsRequest)
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, undecodableStatus(err)
	}
	if err := validateMessage(req); err != nil {
		return nil, err
	}
	rels := make([]rel.Relationship, 0, len(req.Relationships))
	for _, w := range req.Relationships {
		r, err := s.relationshipFromWire(w)
		if err != nil {
			return rels, err
		}
		rels = append(rels, r)
	}
	return rels, nil
}

// decodeImport decodes an import message straight into relationships, with one
// string allocation per relationship where the generated code makes nine objects. It
// takes the shape nearly every import has: each field at most once, no caveat, no
// expiration, no unknown field, and relationships that rel.Validate accepts (the
// request's proto rules and relationshipFromWire then accept them too). ok is false
// for anything else, which the caller decodes with the generated code, so that every
// answer, error or not, is the one that code gives.
func decodeImport(b []byte) (rels []rel.Relationship, ok bool) {
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
