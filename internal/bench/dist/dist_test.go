package dist

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// topShare draws k samples and returns the share of draws that went to the most
// drawn 20% of the n ids.
func topShare(t *testing.T, s Spec, k int) float64 {
	t.Helper()
	smp := s.New(rand.New(rand.NewPCG(7, 7)))
	counts := make([]int, s.N)
	for range k {
		id := smp.Next()
		if id < 0 || id >= s.N {
			t.Fatalf("%s drew %d outside [0, %d)", s.Kind, id, s.N)
		}
		counts[id]++
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	top := 0
	for _, c := range counts[:s.N/5] {
		top += c
	}
	return float64(top) / float64(k)
}

func TestParetoTop20PercentDrawsAbout80Percent(t *testing.T) {
	for _, n := range []int{1000, 100_000} {
		share := topShare(t, Spec{Kind: Pareto, N: n, Seed: 3}, 2_000_000)
		if share < 0.76 || share > 0.84 {
			t.Errorf("n=%d: top 20%% of ids drew %.3f of the samples, want about 0.80", n, share)
		}
	}
}

func TestUniformIsNotSkewed(t *testing.T) {
	share := topShare(t, Spec{Kind: Uniform, N: 1000}, 1_000_000)
	if share > 0.22 {
		t.Errorf("uniform top 20%% share %.3f, want about 0.20", share)
	}
}

func TestZipfIsSkewedAndPermuted(t *testing.T) {
	s := Spec{Kind: Zipf, N: 10_000, Seed: 5}
	if share := topShare(t, s, 500_000); share < 0.8 {
		t.Errorf("zipf(1.1) top 20%% share %.3f, want heavy skew (> 0.8)", share)
	}
	smp := s.New(rand.New(rand.NewPCG(1, 1)))
	counts := map[int]int{}
	for range 100_000 {
		counts[smp.Next()]++
	}
	if counts[0] > counts[smp.Next()]*100 && counts[0] > 10_000 {
		t.Errorf("id 0 drew %d times: the permutation should move the most popular rank away from 0", counts[0])
	}
}

func TestDAUDrawsOnlyTheSample(t *testing.T) {
	smp := Spec{Kind: DAU, N: 1000, Factor: 0.01}.New(rand.New(rand.NewPCG(1, 2)))
	seen := map[int]bool{}
	for range 10_000 {
		id := smp.Next()
		if id%100 != 0 || id >= 1000 {
			t.Fatalf("dau drew %d, want one of 0, 100, ..., 900", id)
		}
		seen[id] = true
	}
	if len(seen) != 10 {
		t.Errorf("dau drew %d distinct ids, want all 10 of the sample", len(seen))
	}
}

func TestSameSeedSameDraws(t *testing.T) {
	for _, kind := range []string{Uniform, Zipf, Pareto, DAU} {
		s := Spec{Kind: kind, N: 5000, Factor: 0.1, Seed: 9}
		a, b := s.New(rand.New(rand.NewPCG(4, 4))), s.New(rand.New(rand.NewPCG(4, 4)))
		for i := range 1000 {
			if x, y := a.Next(), b.Next(); x != y {
				t.Fatalf("%s: draw %d differs between equal seeds: %d vs %d", kind, i, x, y)
			}
		}
	}
}

func TestAffineIsAPermutation(t *testing.T) {
	for _, n := range []int{1, 2, 7, 100, 1024, 999_983} {
		p := newAffine(n, uint64(n))
		seen := make([]bool, n)
		for r := range n {
			id := p.at(r)
			if seen[id] {
				t.Fatalf("n=%d: rank %d maps to %d twice", n, r, id)
			}
			seen[id] = true
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []Spec{{Kind: "gauss", N: 1}, {Kind: Uniform}, {Kind: Zipf, N: 10, S: 0.5}, {Kind: DAU, N: 10, Factor: 2}}
	for _, s := range bad {
		if s.Validate() == nil {
			t.Errorf("%+v: Validate accepted it", s)
		}
	}
	if err := (Spec{Kind: Pareto, N: 10}).Validate(); err != nil {
		t.Errorf("pareto with defaults: %v", err)
	}
}
