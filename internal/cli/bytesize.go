package cli

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// byteSize is a flag holding a number of bytes, written as a plain number, a number
// with a unit (64MiB, 1GB), or a share of the memory this process may use (5%): the
// cgroup's memory limit when there is one, else the machine's memory. A negative
// number turns the sized thing off.
type byteSize struct {
	v    *int64
	text string
}

func newByteSize(v *int64, def int64) *byteSize {
	*v = def
	text := strconv.FormatInt(def, 10)
	if def > 0 && def%(1<<20) == 0 {
		text = strconv.FormatInt(def>>20, 10) + "MiB"
	}
	return &byteSize{v: v, text: text}
}

func (b *byteSize) String() string { return b.text }
func (b *byteSize) Type() string   { return "bytes" }

func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s, availableMemory)
	if err != nil {
		return err
	}
	*b.v, b.text = n, s
	return nil
}

var byteUnits = []struct {
	suffix string
	scale  int64
}{
	{"KiB", 1 << 10},
	{"MiB", 1 << 20},
	{"GiB", 1 << 30},
	{"TiB", 1 << 40},
	{"KB", 1e3},
	{"MB", 1e6},
	{"GB", 1e9},
	{"TB", 1e12},
	{"B", 1},
}

// parseByteSize reads a byte size; memory reports the bytes a percentage is taken of.
func parseByteSize(s string, memory func() (int64, error)) (int64, error) {
	s = strings.TrimSpace(s)
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil || p <= 0 || p > 100 {
			return 0, fmt.Errorf("%q: a share of memory must be a percentage above 0 and at most 100", s)
		}
		total, err := memory()
		if err != nil {
			return 0, fmt.Errorf("%q: %w", s, err)
		}
		return int64(float64(total) * p / 100), nil
	}
	scale := int64(1)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, scale = strings.TrimSpace(num), u.scale
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte size: write a number of bytes, a size such as 64MiB or 1GB, or a share of memory such as 5%%", s)
	}
	return int64(n * float64(scale)), nil
}

// availableMemory is the cgroup (v2, then v1) memory limit, or the machine's memory.
func availableMemory() (int64, error) {
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(path); err == nil {
			// "max", or a v1 limit near 2^63, means no limit: fall through to the machine.
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<60 {
				return n, nil
			}
		}
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("cannot tell how much memory this machine has (%v): give a size in bytes", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil && kb > 0 {
				return kb << 10, nil
			}
		}
	}
	return 0, fmt.Errorf("cannot tell how much memory this machine has (no MemTotal in /proc/meminfo): give a size in bytes")
}
