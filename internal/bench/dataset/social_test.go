package dataset

import (
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
)

// digest generates d and returns a hash of its relationships and per-relation counts.
func digest(t *testing.T, d Dataset) (uint64, map[string]int, []rel.Relationship) {
	t.Helper()
	h := fnv.New64a()
	counts := map[string]int{}
	var all []rel.Relationship
	err := d.Generate(func(r rel.Relationship) error {
		h.Write([]byte(rel.String(r) + "\n"))
		k := r.Resource.Type + "#" + r.Relation
		if r.Subject.Object.ID == rel.Wildcard {
			k += "@*"
		}
		counts[k]++
		all = append(all, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h.Sum64(), counts, all
}

func TestSocialSameSeedSameData(t *testing.T) {
	a, _, _ := digest(t, Social{Users: 2000, Seed: 4})
	b, _, _ := digest(t, Social{Users: 2000, Seed: 4})
	c, _, _ := digest(t, Social{Users: 2000, Seed: 5})
	if a != b {
		t.Error("the same seed produced different data")
	}
	if a == c {
		t.Error("different seeds produced the same data")
	}
}

func TestSocialShape(t *testing.T) {
	const n = 20_000
	d := Social{Users: n, Seed: 1}
	_, counts, all := digest(t, d)
	follows := counts["user#follower"] + counts["user#blocked"]
	if f := float64(follows) / n; f < 7 || f > 13 {
		t.Errorf("%.1f follows per user, want about 10", f)
	}
	if b := float64(counts["user#blocked"]) / float64(follows); b < 0.005 || b > 0.015 {
		t.Errorf("%.4f of follows are blocks, want about 0.01", b)
	}
	if p := float64(counts["content#public@*"]) / n; p < 0.23 || p > 0.27 {
		t.Errorf("%.3f of contents are public, want about 0.25", p)
	}
	if est := d.Estimate(); float64(len(all)) < 0.8*float64(est) || float64(len(all)) > 1.2*float64(est) {
		t.Errorf("generated %d relationships, Estimate said %d", len(all), est)
	}
	owners := map[string]int{}
	followers := map[string]int{}
	for _, r := range all {
		switch {
		case r.Resource.Type == "content" && r.Relation == "owner":
			owners[r.Subject.Object.ID]++
		case r.Relation == "follower" && r.Subject.Object.ID != rel.Wildcard:
			followers[r.Resource.ID]++
		}
	}
	// One content per user on average: ranking users by their observed counts picks the
	// lucky ones too, so the observed share sits above the distribution's 0.80.
	if s := topShare(owners, n); s < 0.75 || s > 0.92 {
		t.Errorf("the most active 20%% of users own %.3f of the content, want about 0.80", s)
	}
	most := slices.Max(mapValues(followers))
	if most < 200 {
		t.Errorf("the most followed user has %d followers, want a heavy tail (hundreds at least)", most)
	}
}

func topShare(counts map[string]int, n int) float64 {
	v := mapValues(counts)
	slices.Sort(v)
	slices.Reverse(v)
	total, top := 0, 0
	for i, c := range v {
		total += c
		if i < n/5 {
			top += c
		}
	}
	return float64(top) / float64(total)
}

func mapValues(m map[string]int) []int {
	v := make([]int, 0, len(m))
	for _, c := range m {
		v = append(v, c)
	}
	return v
}

func TestDatasetsAreValidForTheirSchema(t *testing.T) {
	if _, err := schema.Compile(SocialSchema); err != nil {
		t.Fatal(err)
	}
	for _, name := range Names {
		d, err := ByName(name, 50, 1)
		if err != nil {
			t.Fatal(err)
		}
		err = d.Generate(func(r rel.Relationship) error { return rel.Validate(r) })
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestGenerateStopsOnError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Social{Users: 100, Seed: 1}.Generate(func(rel.Relationship) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Generate returned %v after %d relationships, want the yield error after 1", err, n)
	}
}

func TestByNameErrors(t *testing.T) {
	if _, err := ByName("twitter", 10, 1); err == nil || !strings.Contains(err.Error(), "twitter") {
		t.Errorf("unknown data set: %v", err)
	}
	if _, err := ByName("social", 0, 1); err == nil {
		t.Error("zero users accepted")
	}
}

func TestPermifyShape(t *testing.T) {
	d := Permify{Users: 8}
	_, counts, all := digest(t, d)
	if len(all) != d.Estimate() {
		t.Errorf("generated %d, Estimate %d", len(all), d.Estimate())
	}
	if counts["content#public@*"] != 2 || counts["interaction#parent"] != 8 {
		t.Errorf("counts %v", counts)
	}
}
