package pebble

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latch-authz/latch/internal/rel"
)

// A version's value, the same at its forward and reverse keys:
//
//	uvarint deleted revision (0: live) | flags | [varint sec, uvarint nsec] | [uvarint len, caveat name, context JSON]
//
// The deleted revision comes first so that ending a version rewrites one varint and
// copies the rest.
const (
	flagExpires = 1 << iota
	flagCaveat
)

var errCorrupt = errors.New("pebble store: corrupt relationship record")

// encodeBody encodes r's caveat and expiration: the value without its deleted field.
func encodeBody(r *rel.Relationship) ([]byte, error) {
	var flags byte
	if r.Expiration != nil {
		flags |= flagExpires
	}
	if r.Caveat != nil {
		flags |= flagCaveat
	}
	out := []byte{flags}
	if r.Expiration != nil {
		out = binary.AppendVarint(out, r.Expiration.Unix())
		out = binary.AppendUvarint(out, uint64(r.Expiration.Nanosecond()))
	}
	if c := r.Caveat; c != nil {
		out = binary.AppendUvarint(out, uint64(len(c.Name)))
		out = append(out, c.Name...)
		if len(c.Context) > 0 {
			ctx, err := json.Marshal(c.Context)
			if err != nil {
				return nil, fmt.Errorf("caveat context cannot be stored as JSON: %v", err)
			}
			out = append(out, ctx...)
		}
	}
	return out, nil
}

// liveValue returns the value of a new live version with body.
func liveValue(body []byte) []byte {
	return append([]byte{0}, body...)
}

// splitValue returns a value's deleted revision and body.
func splitValue(v []byte) (deleted uint64, body []byte, err error) {
	d, n := binary.Uvarint(v)
	if n <= 0 || n >= len(v) {
		return 0, nil, errCorrupt
	}
	return d, v[n:], nil
}

// endedValue returns v with its deleted revision set to rev.
func endedValue(v []byte, rev uint64) ([]byte, error) {
	_, body, err := splitValue(v)
	if err != nil {
		return nil, err
	}
	return append(binary.AppendUvarint(make([]byte, 0, len(body)+10), rev), body...), nil
}

// expiry is a decoded expiration; set is false when the version does not expire.
type expiry struct {
	set  bool
	sec  int64
	nsec uint32
}

// expiredAt reports whether the expiration is at or before now (sec, nsec).
func (e expiry) expiredAt(now expiry) bool {
	return e.set && (e.sec < now.sec || e.sec == now.sec && e.nsec <= now.nsec)
}

func expiryOf(t time.Time) expiry {
	return expiry{set: true, sec: t.Unix(), nsec: uint32(t.Nanosecond())}
}

// bodyExpiry reads only the expiration of a body.
func bodyExpiry(body []byte) (expiry, error) {
	if len(body) == 0 {
		return expiry{}, errCorrupt
	}
	if body[0]&flagExpires == 0 {
		return expiry{}, nil
	}
	sec, n := binary.Varint(body[1:])
	if n <= 0 {
		return expiry{}, errCorrupt
	}
	nsec, m := binary.Uvarint(body[1+n:])
	if m <= 0 || nsec >= 1e9 {
		return expiry{}, errCorrupt
	}
	return expiry{set: true, sec: sec, nsec: uint32(nsec)}, nil
}

// decodeBody fills r's caveat and expiration from body. Every call builds a fresh
// context map, so callers may change what they get.
func decodeBody(body []byte, r *rel.Relationship) error {
	if len(body) == 0 {
		return errCorrupt
	}
	flags, rest := body[0], body[1:]
	if flags&flagExpires != 0 {
		sec, n := binary.Varint(rest)
		if n <= 0 {
			return errCorrupt
		}
		nsec, m := binary.Uvarint(rest[n:])
		if m <= 0 || nsec >= 1e9 {
			return errCorrupt
		}
		t := time.Unix(sec, int64(nsec)).UTC()
		r.Expiration = &t
		rest = rest[n+m:]
	}
	if flags&flagCaveat != 0 {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return errCorrupt
		}
		c := &rel.Caveat{Name: string(rest[n : n+int(l)])}
		if ctx := rest[n+int(l):]; len(ctx) > 0 {
			if err := json.Unmarshal(ctx, &c.Context); err != nil {
				return errCorrupt
			}
		}
		r.Caveat = c
	}
	return nil
}
