package gcpace

import "testing"

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, fixed uint64
		base, want  int
	}{
		{66 * mib, 64 * mib, 100, 48},  // a fixed cache and little else: the floor
		{200 * mib, 64 * mib, 100, 68}, // headroom is 100% of the 136 MiB that changes
		{200 * mib, 64 * mib, 50, 34},  // GOGC=50: half of it
		{10 * mib, 0, 100, 100},        // never more than GOGC
		{64 * mib, 128 * mib, 100, 50}, // a heap smaller than the cache (not yet touched)
		{0, 64 * mib, 100, 100},        // nothing measured yet
		{500 * mib, 64 * mib, 0, 0},    // GOGC=0 is kept
	} {
		if got := gcPercent(tc.live, tc.fixed, tc.base); got != tc.want {
			t.Errorf("gcPercent(%d MiB live, %d MiB fixed, GOGC=%d) = %d, want %d", tc.live/mib, tc.fixed/mib, tc.base, got, tc.want)
		}
	}
}
