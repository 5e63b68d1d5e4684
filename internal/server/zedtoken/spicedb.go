package zedtoken

import (
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// SpiceDB's token is the base64 of a protobuf message (impl.v1.DecodedZedToken) with
// one of two fields set: 2, a legacy zookie holding the revision as a uint64 (its
// field 1), or 3, a V1ZedToken holding the revision as a string (field 1) and a prefix
// of the issuing datastore's unique id (field 2). The fields are read with protowire;
// the message is too small to be worth SpiceDB's generated code.
const (
	spicedbLegacyZookie = 2
	spicedbV1           = 3
)

// decodeSpiceDB returns the *ForeignError for a token SpiceDB would decode, or nil.
// Only a message of exactly one of the two fields, with a revision written as
// SpiceDB's datastores write theirs, counts: anything else stays garbage.
func decodeSpiceDB(raw []byte) *ForeignError {
	num, typ, n := protowire.ConsumeTag(raw)
	if n < 0 || typ != protowire.BytesType {
		return nil
	}
	body, m := protowire.ConsumeBytes(raw[n:])
	if m < 0 || n+m != len(raw) {
		return nil
	}
	fields, ok := consumeFields(body)
	if !ok {
		return nil
	}
	var f ForeignError
	switch num {
	case spicedbLegacyZookie:
		v, ok := fields[1].(uint64)
		if !ok || len(fields) != 1 {
			return nil
		}
		f.Revision = strconv.FormatUint(v, 10)
	case spicedbV1:
		rev, ok := fields[1].([]byte)
		prefix, okPrefix := fields[2].([]byte)
		if !ok || (!okPrefix && fields[2] != nil) || len(fields) > 2 {
			return nil
		}
		f.Revision, f.DatastorePrefix = string(rev), string(prefix)
	default:
		return nil
	}
	if !revisionText(f.Revision) || !printable(f.DatastorePrefix) {
		return nil
	}
	return &f
}

// consumeFields reads a message of varint and length-delimited fields, each at most
// once, into its values by field number.
func consumeFields(b []byte) (map[protowire.Number]any, bool) {
	fields := map[protowire.Number]any{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || fields[num] != nil {
			return nil, false
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return nil, false
			}
			fields[num], b = v, b[m:]
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, false
			}
			fields[num], b = v, b[m:]
		default:
			return nil, false
		}
	}
	return fields, true
}

// revisionText reports whether s could be a revision in SpiceDB's string form: a
// decimal (memdb, MySQL, Spanner), a decimal with a fractional logical part (an HLC of
// CockroachDB), or the base64 of a PostgreSQL snapshot; all are short and printable.
func revisionText(s string) bool {
	return s != "" && len(s) <= 1024 && printable(s)
}

// printable reports whether s is visible ASCII.
func printable(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
