package cli

import (
	"errors"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	memory := func() (int64, error) { return 8 << 30, nil }
	for in, want := range map[string]int64{
		"67108864": 64 << 20, "64MiB": 64 << 20, "64 MiB": 64 << 20, "1GB": 1e9, "1.5KiB": 1536, "512B": 512,
		"5%": (8 << 30) / 20, "-1": -1, "0": 0,
	} {
		got, err := parseByteSize(in, memory)
		if err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "64XB", "0%", "101%", "%"} {
		if n, err := parseByteSize(in, memory); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, n)
		}
	}
	if _, err := parseByteSize("5%", func() (int64, error) { return 0, errors.New("no memory info") }); err == nil {
		t.Error("a share of unknown memory was accepted")
	}
}

func TestAvailableMemory(t *testing.T) {
	n, err := availableMemory()
	if err != nil {
		t.Skip(err) // not Linux
	}
	if n < 16<<20 {
		t.Errorf("available memory %d bytes: implausibly small", n)
	}
}
