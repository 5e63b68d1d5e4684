package permify

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// social is a deterministic data set of the shape the reference workload
// (../shared/workloads/permify) describes: users who follow and block each other and
// may be public, content owned by users and maybe public, and interactions created by
// users on content. It keeps the facts in maps so the test can evaluate the schema
// directly.
type social struct {
	users, contents, interactions int
	follower, blocked             map[[2]int]bool // [owner, subject]
	userPublic, contentPublic     map[int]bool
	contentOwner                  []int
	creator, parent               []int
}

func newSocial(seed uint64) *social {
	r := rand.New(rand.NewPCG(seed, 7))
	s := &social{
		users: 400, contents: 1600, interactions: 1600,
		follower: map[[2]int]bool{}, blocked: map[[2]int]bool{}, userPublic: map[int]bool{}, contentPublic: map[int]bool{},
	}
	for u := range s.users {
		for range 8 {
			s.follower[[2]int{u, r.IntN(s.users)}] = true
		}
		for range 2 {
			s.blocked[[2]int{u, r.IntN(s.users)}] = true
		}
		s.userPublic[u] = r.IntN(2) == 0
	}
	for c := range s.contents {
		s.contentOwner = append(s.contentOwner, r.IntN(s.users))
		s.contentPublic[c] = r.IntN(100) < 35
	}
	for range s.interactions {
		s.creator = append(s.creator, r.IntN(s.users))
		s.parent = append(s.parent, r.IntN(s.contents))
	}
	return s
}

// newPermifyScript is the data set of Permify's published load test: for each id i, user
// i is its own self, followed by user i+1 and blocking user i+2 (mod n); content i is
// owned by user i; interaction i is created by user i on content i; user i and content
// i are public when i%4 == 0. About a quarter of random content and interaction checks
// are allowed.
func newPermifyScript(n int) *social {
	s := &social{
		users: n, contents: n, interactions: n,
		follower: map[[2]int]bool{}, blocked: map[[2]int]bool{}, userPublic: map[int]bool{}, contentPublic: map[int]bool{},
	}
	for i := range n {
		s.follower[[2]int{i, (i + 1) % n}] = true
		s.blocked[[2]int{i, (i + 2) % n}] = true
		s.userPublic[i], s.contentPublic[i] = i%4 == 0, i%4 == 0
		s.contentOwner = append(s.contentOwner, i)
		s.creator = append(s.creator, i)
		s.parent = append(s.parent, i)
	}
	return s
}

// data returns the tuples and attributes, in a fixed order.
func (s *social) data() (tuples, attrs []map[string]any) {
	u := func(i int) string { return fmt.Sprintf("user:%d", i) }
	for i := range s.users {
		tuples = append(tuples, tuple(u(i), "self", u(i)))
		attrs = append(attrs, attr(u(i), "is_public", boolValue(s.userPublic[i])))
	}
	for _, m := range []struct {
		rel string
		set map[[2]int]bool
	}{{"follower", s.follower}, {"blocked", s.blocked}} {
		pairs := slices.SortedFunc(maps.Keys(m.set), func(a, b [2]int) int {
			return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
		})
		for _, p := range pairs {
			tuples = append(tuples, tuple(u(p[0]), m.rel, u(p[1])))
		}
	}
	for c := range s.contents {
		tuples = append(tuples, tuple(fmt.Sprintf("content:%d", c), "owner", u(s.contentOwner[c])))
		// Short and canonical value forms alternate: both must be accepted.
		if c%2 == 0 {
			attrs = append(attrs, attr(fmt.Sprintf("content:%d", c), "is_public", map[string]any{"boolean": s.contentPublic[c]}))
		} else {
			attrs = append(attrs, attr(fmt.Sprintf("content:%d", c), "is_public", boolValue(s.contentPublic[c])))
		}
	}
	for i := range s.interactions {
		tuples = append(tuples, tuple(fmt.Sprintf("interaction:%d", i), "creator", u(s.creator[i])),
			tuple(fmt.Sprintf("interaction:%d", i), "parent", fmt.Sprintf("content:%d", s.parent[i])))
	}
	return tuples, attrs
}

// The schema, evaluated directly.

func (s *social) userView(owner, sub int) bool {
	return owner == sub || (s.userPublic[owner] || s.follower[[2]int{owner, sub}]) && !s.blocked[[2]int{owner, sub}]
}

func (s *social) contentView(c, sub int) bool {
	o := s.contentOwner[c]
	return o == sub || (s.contentPublic[c] || s.follower[[2]int{o, sub}]) && !s.blocked[[2]int{o, sub}]
}

func (s *social) interactionView(i, sub int) bool {
	return s.creator[i] == sub || s.userView(s.creator[i], sub) && s.contentView(s.parent[i], sub)
}

func TestReferenceWorkload(t *testing.T) {
	src, err := os.ReadFile("/work/shared/workloads/permify/schema.perm")
	if err != nil {
		t.Skip("reference workload not present:", err)
	}
	t.Run("permify-script", func(t *testing.T) { runWorkload(t, string(src), newPermifyScript(2500), 0.22, 0.28) })
	t.Run("random-social", func(t *testing.T) { runWorkload(t, string(src), newSocial(1), 0.15, 0.40) })
}

// runWorkload writes s through data/write in batches of 1,000, then checks random
// content and interaction views against a direct evaluation of the schema, and the
// share allowed against [lo, hi].
func runWorkload(t *testing.T, schemaText string, s *social, lo, hi float64) {
	a := newAPI(t, nil)
	a.ok("/v1/tenants/t1/schemas/write", map[string]any{"schema": schemaText})
	tuples, attrs := s.data()
	snap := load(a, tuples, attrs)
	r := newRandForChecks()
	allowedCount, total := 0, 1200
	for n := range total {
		sub := r.IntN(s.users)
		var entity string
		var expect bool
		if n%2 == 0 {
			c := r.IntN(s.contents)
			entity, expect = fmt.Sprintf("content:%d", c), s.contentView(c, sub)
		} else {
			i := r.IntN(s.interactions)
			entity, expect = fmt.Sprintf("interaction:%d", i), s.interactionView(i, sub)
		}
		want := denied
		if expect {
			want = allowed
			allowedCount++
		}
		meta := map[string]any{"metadata": map[string]any{"snap_token": snap, "depth": 20}}
		if got := a.check("t1", entity, "view", fmt.Sprintf("user:%d", sub), meta); got != want {
			t.Fatalf("check %s#view@user:%d = %s, direct evaluation says %s", entity, sub, got, want)
		}
	}
	share := float64(allowedCount) / float64(total)
	t.Logf("%d tuples, %d attributes in batches of 1,000; %.1f%% of %d checks allowed", len(tuples), len(attrs), 100*share, total)
	if share < lo || share > hi {
		t.Errorf("allowed share %.3f is outside the expected [%.2f, %.2f]", share, lo, hi)
	}
}

// load writes tuples, then attributes, through data/write in batches of 1,000 and
// returns the last snap token.
func load(a *api, tuples, attrs []map[string]any) string {
	var snap string
	items := append(append([]map[string]any{}, tuples...), attrs...)
	for start := 0; start < len(items); start += 1000 {
		var bt, ba []map[string]any
		for _, it := range items[start:min(start+1000, len(items))] {
			if _, isAttr := it["attribute"]; isAttr {
				ba = append(ba, it)
			} else {
				bt = append(bt, it)
			}
		}
		out := a.ok("/v1/tenants/t1/data/write", map[string]any{"metadata": map[string]any{"schema_version": ""}, "tuples": bt, "attributes": ba})
		snap, _ = out["snap_token"].(string)
	}
	return snap
}

func newRandForChecks() *rand.Rand { return rand.New(rand.NewPCG(2, 9)) }

// BenchmarkWorkloadCheckHTTP measures permissions/check over HTTP on the reference
// workload's data set, with parallel clients: the shape of Permify's k6 run, in-process.
func BenchmarkWorkloadCheckHTTP(b *testing.B) {
	src, err := os.ReadFile("/work/shared/workloads/permify/schema.perm")
	if err != nil {
		b.Skip("reference workload not present:", err)
	}
	a := newAPI(b, nil)
	a.ok("/v1/tenants/t1/schemas/write", map[string]any{"schema": string(src)})
	s := newPermifyScript(20_000)
	tuples, attrs := s.data()
	load(a, tuples, attrs)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(uint64(n.Add(1)), 3))
		for pb.Next() {
			entity := fmt.Sprintf("content:%d", r.IntN(s.contents))
			if r.IntN(2) == 0 {
				entity = fmt.Sprintf("interaction:%d", r.IntN(s.interactions))
			}
			body := fmt.Sprintf(`{"metadata":{"snap_token":"","schema_version":"","depth":20},"entity":{"type":%q,"id":%q},"permission":"view","subject":{"type":"user","id":"%d","relation":""}}`,
				strings.Split(entity, ":")[0], strings.Split(entity, ":")[1], r.IntN(s.users))
			resp, err := client.Post(a.url+"/v1/tenants/t1/permissions/check", "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	client.CloseIdleConnections()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
}
