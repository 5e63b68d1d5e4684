package relv1

import (
	"unicode/utf8"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// DecodeCheckRequest reads the bytes of a CheckPermissionRequest into req, a new
// message, as the generated code would, without its reflection and with all its
// strings in one allocation. It takes the shape nearly every check has: each field at
// most once, no caveat context, no unknown field, valid UTF-8. ok is false for
// anything else, which the caller decodes with the generated code (req may then hold
// part of b).
func DecodeCheckRequest(b []byte, req *v1.CheckPermissionRequest) (ok bool) {
	s := string(b) // the one allocation of the strings
	var seen uint64
	for len(s) > 0 {
		num, v, isVarint, rest := nextAnyField(s)
		if num < 1 || num > 6 || num == 5 || seen&(1<<num) != 0 || isVarint != (num == 6) {
			return false
		}
		seen |= 1 << num
		s = rest
		switch num {
		case 1:
			req.Consistency, ok = decodeConsistency(v)
		case 2:
			req.Resource = &v1.ObjectReference{}
			ok = decodeObjectReference(v, req.Resource)
		case 3:
			req.Permission, ok = v, utf8.ValidString(v)
		case 4:
			req.Subject, ok = decodeSubjectReference(v)
		case 6:
			req.WithTracing, ok = v != "", true
		}
		if !ok {
			return false
		}
	}
	return true
}

// nextAnyField reads the field s starts with, length-delimited or a varint: its
// number, its value (for a varint, "" for zero and "1" for anything else, which is
// how the bool fields this reads decode), and the rest of s. num is 0 when s does not
// start with a field of either kind.
func nextAnyField(s string) (num uint64, v string, isVarint bool, rest string) {
	tag, n := uvarint(s)
	if n < 0 {
		return 0, "", false, ""
	}
	switch protowire.Type(tag & 7) {
	case protowire.VarintType:
		x, m := uvarint(s[n:])
		if m < 0 {
			return 0, "", false, ""
		}
		if x != 0 {
			v = "1"
		}
		return tag >> 3, v, true, s[n+m:]
	case protowire.BytesType:
		num, start, end := nextField(s)
		return num, s[start:end], false, s[end:]
	}
	return 0, "", false, ""
}

// decodeConsistency decodes a Consistency: at most one of its requirements, once.
func decodeConsistency(s string) (*v1.Consistency, bool) {
	c := &v1.Consistency{}
	for len(s) > 0 {
		num, v, isVarint, rest := nextAnyField(s)
		if c.Requirement != nil {
			return nil, false
		}
		switch {
		case num == 1 && isVarint:
			c.Requirement = &v1.Consistency_MinimizeLatency{MinimizeLatency: v != ""}
		case num == 4 && isVarint:
			c.Requirement = &v1.Consistency_FullyConsistent{FullyConsistent: v != ""}
		case (num == 2 || num == 3) && !isVarint:
			token, ok := decodeZedToken(v)
			if !ok {
				return nil, false
			}
			if num == 2 {
				c.Requirement = &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: token}
			} else {
				c.Requirement = &v1.Consistency_AtExactSnapshot{AtExactSnapshot: token}
			}
		default:
			return nil, false
		}
		s = rest
	}
	return c, true
}

// decodeZedToken decodes a ZedToken.
func decodeZedToken(s string) (*v1.ZedToken, bool) {
	t := &v1.ZedToken{}
	ok := wireStrings(s, 1, func(_ uint64, v string) bool {
		t.Token = v
		return utf8.ValidString(v)
	})
	return t, ok
}

// decodeObjectReference decodes an ObjectReference into o.
func decodeObjectReference(s string, o *v1.ObjectReference) bool {
	return objectFields(s, &o.ObjectType, &o.ObjectId)
}

// decodeSubjectReference decodes a SubjectReference.
func decodeSubjectReference(s string) (*v1.SubjectReference, bool) {
	sr := &v1.SubjectReference{}
	ok := wireStrings(s, 2, func(num uint64, v string) bool {
		if num == 1 {
			sr.Object = &v1.ObjectReference{}
			return decodeObjectReference(v, sr.Object)
		}
		sr.OptionalRelation = v
		return utf8.ValidString(v)
	})
	return sr, ok
}
