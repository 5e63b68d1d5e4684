package zedtoken

import (
	"encoding/base64"
	"errors"
	"math"
	"testing"

	"github.com/latch-authz/latch/internal/store"
)

func TestRoundTrip(t *testing.T) {
	for _, rev := range []store.Revision{0, 1, 127, 128, 1 << 40, math.MaxUint64} {
		tok := Encode(rev)
		got, err := Decode(tok)
		if err != nil {
			t.Fatalf("Decode(Encode(%d)) = %v", rev, err)
		}
		if got != rev {
			t.Fatalf("Decode(Encode(%d)) = %d", rev, got)
		}
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	valid := Encode(42)
	raw, _ := base64.StdEncoding.DecodeString(valid)
	flipped := append([]byte(nil), raw...)
	flipped[2] ^= 0x01
	v2 := append([]byte(nil), raw...)
	v2[1] = 2
	for name, tok := range map[string]string{
		"empty":                    "",
		"not base64":               "!!!",
		"spicedb v1 with a number": base64.StdEncoding.EncodeToString([]byte{0x1a, 0x02, 0x08, 0x05}),
		"spicedb empty revision":   base64.StdEncoding.EncodeToString([]byte{0x1a, 0x00}),
		"spicedb trailing bytes":   "GhUKEzE3MDAwMDAwMDAwMDAwMDAwMDA=AA==",
		"proto of another field":   base64.StdEncoding.EncodeToString([]byte{0x0a, 0x02, 0x0a, 0x00}),
		"short":                    base64.StdEncoding.EncodeToString([]byte{'L', 1}),
		"bit flip":                 base64.StdEncoding.EncodeToString(flipped),
		"version":                  base64.StdEncoding.EncodeToString(v2),
		"truncated":                valid[:len(valid)-4],
	} {
		if _, err := Decode(tok); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Decode(%q) error = %v, want ErrMalformed", name, tok, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(7))
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		rev, err := Decode(tok)
		if err == nil && Encode(rev) != tok {
			t.Fatalf("Decode accepted %q but it re-encodes as %q", tok, Encode(rev))
		}
	})
}

// SpiceDB's tokens (base64 of impl.v1.DecodedZedToken) are told apart from garbage:
// Decode answers them with a *ForeignError naming the revision and datastore.
func TestDecodeSpiceDBTokens(t *testing.T) {
	for _, tc := range []struct {
		name, tok, rev, prefix string
	}{
		// A memdb token of SpiceDB v1.56 as zed received it: v1, revision, datastore id prefix.
		{"v1 with datastore id", v1Token("1795738809865076928", "ae7fd619"), "1795738809865076928", "ae7fd619"},
		{"v1 legacy (no datastore id)", "GhUKEzE3MDAwMDAwMDAwMDAwMDAwMDA=", "1700000000000000000", ""},
		{"v1 HLC revision", v1Token("1700000000000000000.0000000001", "6f1f2c3d"), "1700000000000000000.0000000001", "6f1f2c3d"},
		{"deprecated zookie", base64.StdEncoding.EncodeToString([]byte{0x12, 0x02, 0x08, 0x2a}), "42", ""},
	} {
		_, err := Decode(tc.tok)
		f, ok := errors.AsType[*ForeignError](err)
		if !ok {
			t.Errorf("%s: Decode(%q) = %v, want a *ForeignError", tc.name, tc.tok, err)
			continue
		}
		if f.Revision != tc.rev || f.DatastorePrefix != tc.prefix || errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %+v (malformed %v), want revision %q prefix %q", tc.name, f, errors.Is(err, ErrMalformed), tc.rev, tc.prefix)
		}
	}
}

// v1Token builds a SpiceDB v1 token by hand: field 3 holding fields 1 and 2.
func v1Token(rev, prefix string) string {
	inner := append([]byte{0x0a, byte(len(rev))}, rev...)
	inner = append(inner, 0x12, byte(len(prefix)))
	inner = append(inner, prefix...)
	return base64.StdEncoding.EncodeToString(append([]byte{0x1a, byte(len(inner))}, inner...))
}
