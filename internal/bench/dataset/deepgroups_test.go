package dataset

import (
	"strconv"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
)

func TestDeepGroupsSameSeedSameData(t *testing.T) {
	a, _, _ := digest(t, DeepGroupsFor(2000, 4))
	b, _, _ := digest(t, DeepGroupsFor(2000, 4))
	c, _, _ := digest(t, DeepGroupsFor(2000, 5))
	if a != b {
		t.Error("the same seed produced different data")
	}
	if a == c {
		t.Error("different seeds produced the same data")
	}
}

// deepShape is what TestDeepGroupsShape reads from a generated data set.
type deepShape struct {
	children map[int][]int // group -> its member groups
	groupsOf map[int][]int // user -> the groups naming it
	viewerOf map[int][]int // document -> the groups it is shared with
}

func idOf(t *testing.T, prefix, id string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(id, prefix))
	if err != nil || !strings.HasPrefix(id, prefix) {
		t.Fatalf("id %q is not %s<number>", id, prefix)
	}
	return n
}

func readDeepShape(t *testing.T, all []rel.Relationship) deepShape {
	t.Helper()
	s := deepShape{children: map[int][]int{}, groupsOf: map[int][]int{}, viewerOf: map[int][]int{}}
	for _, r := range all {
		sub := r.Subject
		switch {
		case r.Resource.Type == "group" && sub.Object.Type == "group":
			if sub.Relation != "member" {
				t.Fatalf("%s: a nested group must be a group#member set", rel.String(r))
			}
			p, c := idOf(t, "g", r.Resource.ID), idOf(t, "g", sub.Object.ID)
			s.children[p] = append(s.children[p], c)
		case r.Resource.Type == "group":
			u := idOf(t, "u", sub.Object.ID)
			s.groupsOf[u] = append(s.groupsOf[u], idOf(t, "g", r.Resource.ID))
		case r.Resource.Type == "document" && r.Relation == "viewer":
			d := idOf(t, "d", r.Resource.ID)
			s.viewerOf[d] = append(s.viewerOf[d], idOf(t, "g", sub.Object.ID))
		}
	}
	return s
}

// longestChain returns the most edges on a path down the group DAG, failing the test
// on a cycle.
func longestChain(t *testing.T, children map[int][]int, groups int) int {
	t.Helper()
	const (
		unseen = iota
		open
		closed
	)
	state := make([]int, groups)
	depth := make([]int, groups)
	var visit func(g int) int
	visit = func(g int) int {
		switch state[g] {
		case open:
			t.Fatalf("group g%d is in a cycle", g)
		case closed:
			return depth[g]
		}
		state[g] = open
		for _, c := range children[g] {
			depth[g] = max(depth[g], 1+visit(c))
		}
		state[g] = closed
		return depth[g]
	}
	most := 0
	for g := range groups {
		most = max(most, visit(g))
	}
	return most
}

func TestDeepGroupsShape(t *testing.T) {
	d := DeepGroupsFor(8000, 1)
	_, counts, all := digest(t, d)
	if est := d.Estimate(); float64(len(all)) < 0.9*float64(est) || float64(len(all)) > 1.1*float64(est) {
		t.Errorf("generated %d relationships, Estimate said %d", len(all), est)
	}
	if counts["document#parent"] != d.Documents || counts["document#owner"] != d.Documents {
		t.Errorf("%d document parents and %d owners, want one each for %d documents",
			counts["document#parent"], counts["document#owner"], d.Documents)
	}
	seen := map[rel.Key]bool{}
	for _, r := range all {
		if seen[r.Key()] {
			t.Fatalf("%s comes twice", rel.String(r))
		}
		seen[r.Key()] = true
	}
	s := readDeepShape(t, all)
	if chain := longestChain(t, s.children, d.Groups); chain < 10 {
		t.Errorf("the longest chain of nested groups has %d edges, want at least 10", chain)
	}
	for g, cs := range s.children {
		for _, c := range cs {
			if c <= g {
				t.Fatalf("group g%d holds g%d: edges must go from lower ids to higher", g, c)
			}
		}
	}
	if len(s.groupsOf) != d.Users {
		t.Errorf("%d users are in a group, want all %d", len(s.groupsOf), d.Users)
	}
	// Pareto-sized: the largest fifth of the groups that hold groups hold most of them.
	sizes := map[string]int{}
	for g, cs := range s.children {
		sizes[strconv.Itoa(g)] = len(cs)
	}
	if share := topShare(sizes, len(sizes)); share < 0.6 {
		t.Errorf("the largest 20%% of parent groups hold %.2f of the nested groups, want most", share)
	}
	// Document d<i> is shared with an ancestor of user u<i>'s groups.
	for i := range 50 {
		if !reaches(s, s.viewerOf[i], s.groupsOf[i]) {
			t.Fatalf("user u%d cannot reach document d%d through its groups", i, i)
		}
	}
}

// reaches reports whether a group of from holds, directly or through nested groups,
// a group of to.
func reaches(s deepShape, from, to []int) bool {
	want := map[int]bool{}
	for _, g := range to {
		want[g] = true
	}
	seen := map[int]bool{}
	stack := append([]int(nil), from...)
	for len(stack) > 0 {
		g := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if want[g] {
			return true
		}
		if !seen[g] {
			seen[g] = true
			stack = append(stack, s.children[g]...)
		}
	}
	return false
}

func TestDeepGroupsSchemaCompiles(t *testing.T) {
	if _, err := schema.Compile(DeepGroupsSchema); err != nil {
		t.Fatal(err)
	}
}

func TestDeepGroupsRejectsEmptySizes(t *testing.T) {
	err := DeepGroups{Groups: 10, Users: 10, Folders: 0, Documents: 10}.Generate(func(rel.Relationship) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "folders") {
		t.Fatalf("got %v, want an error naming folders", err)
	}
}
