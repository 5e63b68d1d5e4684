// Package zedtoken owns the wire form of consistency tokens (SpiceDB's ZedTokens): an
// opaque, versioned string that carries a store revision. Clients treat tokens as
// opaque; the version byte lets the encoding change without breaking tokens already
// handed out, and the checksum makes a mistyped or foreign token fail loudly instead of
// silently naming some other revision.
//
// Tokens SpiceDB issued are told apart from garbage: a client that moved from SpiceDB
// has them stored, and a token that names a revision of another datastore is still a
// well-formed request. Decode reports them as a *ForeignError, which the server reads
// as "older than anything here" or refuses, by the consistency asked for.
package zedtoken

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync/atomic"

	"github.com/latch-authz/latch/internal/store"
)

const (
	magic    = 'L' // marks a latch token, so SpiceDB's own tokens are told apart
	version1 = 1
	crcLen   = 4
)

// ErrMalformed is wrapped by every Decode failure but a *ForeignError.
var ErrMalformed = errors.New("malformed zedtoken")

// ForeignError is Decode's answer for a well-formed token SpiceDB issued: its
// revision (decimal, or an HLC's decimal with a logical part; SpiceDB's own string
// form) names a point in another datastore's history, which this server cannot place
// in its own.
type ForeignError struct {
	Revision string
	// DatastorePrefix is the first bytes of the issuing datastore's unique id; empty
	// for SpiceDB's legacy tokens.
	DatastorePrefix string
}

func (e *ForeignError) Error() string {
	from := "a SpiceDB datastore"
	if e.DatastorePrefix != "" {
		from = fmt.Sprintf("SpiceDB datastore %q", e.DatastorePrefix)
	}
	return fmt.Sprintf("the zedtoken names revision %s of %s, which is not in this server's history", e.Revision, from)
}

// encoded is a revision's token.
type encoded struct {
	rev store.Revision
	tok string
}

// last is the last token Encode made: most answers carry the same (quantized)
// revision as the one before.
var last atomic.Pointer[encoded]

// Encode returns the token for rev.
func Encode(rev store.Revision) string {
	if e := last.Load(); e != nil && e.rev == rev {
		return e.tok
	}
	tok := encode(rev)
	last.Store(&encoded{rev: rev, tok: tok})
	return tok
}

func encode(rev store.Revision) string {
	buf := make([]byte, 0, 2+binary.MaxVarintLen64+crcLen)
	buf = append(buf, magic, version1)
	buf = binary.AppendUvarint(buf, uint64(rev))
	buf = binary.BigEndian.AppendUint32(buf, crc32.ChecksumIEEE(buf))
	return base64.StdEncoding.EncodeToString(buf)
}

// Decode returns the revision tok carries. Anything Encode did not produce fails with
// an error wrapping ErrMalformed that says what was wrong.
func Decode(tok string) (store.Revision, error) {
	if tok == "" {
		return 0, fmt.Errorf("%w: the token is empty", ErrMalformed)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(tok)
	if err != nil {
		return 0, fmt.Errorf("%w: not base64", ErrMalformed)
	}
	if len(raw) < 2+1+crcLen || raw[0] != magic {
		if f := decodeSpiceDB(raw); f != nil {
			return 0, f
		}
		return 0, fmt.Errorf("%w: not a token issued by this server or by SpiceDB", ErrMalformed)
	}
	if raw[1] != version1 {
		return 0, fmt.Errorf("%w: unsupported token version %d", ErrMalformed, raw[1])
	}
	body, sum := raw[:len(raw)-crcLen], raw[len(raw)-crcLen:]
	if crc32.ChecksumIEEE(body) != binary.BigEndian.Uint32(sum) {
		return 0, fmt.Errorf("%w: checksum mismatch", ErrMalformed)
	}
	rev, n := binary.Uvarint(body[2:])
	// A non-minimal varint would let two tokens name one revision.
	if n <= 0 || 2+n != len(body) || n != len(binary.AppendUvarint(nil, rev)) {
		return 0, fmt.Errorf("%w: bad revision encoding", ErrMalformed)
	}
	return store.Revision(rev), nil
}
