package engine

import (
	"fmt"
	"slices"
	"testing"
)

// TestDedupe: repeats go and the first-seen order stays, on both sides of the size at
// which dedupe switches from comparing pairs to a map; the input is never changed.
func TestDedupe(t *testing.T) {
	long := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprint("x", i%7, "-", i%3))
		}
		return out
	}
	for _, tc := range []struct{ in, want []string }{
		{nil, nil},
		{[]string{"a"}, []string{"a"}},
		{[]string{"b", "a", "c"}, []string{"b", "a", "c"}},
		{[]string{"b", "a", "b", "c", "a"}, []string{"b", "a", "c"}},
		{[]string{"a", "a", "a", "a", "a", "a", "a", "a"}, []string{"a"}},
		{long(9), []string{"x0-0", "x1-1", "x2-2", "x3-0", "x4-1", "x5-2", "x6-0", "x0-1", "x1-2"}},
		{long(30), nil}, // checked against the map-free reference below
	} {
		in := slices.Clone(tc.in)
		got := dedupe(in)
		want := tc.want
		if want == nil {
			for _, id := range tc.in {
				if !slices.Contains(want, id) {
					want = append(want, id)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("dedupe(%q) = %q, want %q", tc.in, got, want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("dedupe changed its input %q to %q", tc.in, in)
		}
	}
}
