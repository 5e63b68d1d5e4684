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
		"empty":      "",
		"not base64": "!!!",
		"spicedb":    "GhUKEzE3MDAwMDAwMDAwMDAwMDAwMDA=",
		"short":      base64.StdEncoding.EncodeToString([]byte{'L', 1}),
		"bit flip":   base64.StdEncoding.EncodeToString(flipped),
		"version":    base64.StdEncoding.EncodeToString(v2),
		"truncated":  valid[:len(valid)-4],
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
