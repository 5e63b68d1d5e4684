package dataset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/latch-authz/latch/internal/bench/dist"
	"github.com/latch-authz/latch/internal/rel"
)

// DeepGroupsSchema nests groups in groups, folders in folders, and shares documents and
// folders with groups, so that a document's viewers are reached through long chains of
// subject sets.
const DeepGroupsSchema = `definition user {}

definition group {
	relation member: user | group#member
	permission access = member
}

definition folder {
	relation parent: folder
	relation viewer: user | group#member
	permission view = viewer + parent->view
}

definition document {
	relation parent: folder
	relation owner: user
	relation viewer: user | group#member
	permission view = owner + viewer + parent->view
}
`

// DeepGroups sizes an organisation of nested groups. The reference size is 100,000
// groups, 200,000 users, 50,000 folders and 500,000 documents (about 2.06M
// relationships); DeepGroupsFor derives the other sizes from the users in those
// proportions.
//
// Groups form a DAG of GroupLevels levels: DeepTopGroups top-level groups (g0..g9),
// then levels growing by a factor of 1.9 down to the deepest, which holds almost half
// of them. Group ids run in level order, top first. Every group below the top is a
// member (group:parent#member@group:child#member) of a parent one level up, drawn
// Pareto-shaped so that a few groups hold most of the next level, and a quarter of
// them also of a second parent at any shallower level: a DAG, never a cycle, since
// every edge goes from a lower id to a higher one. 85% of users are in a deepest
// group, 10% in the level above, 5% in the one above that (Pareto-shaped again), and
// 30% have a second membership at any level. Folders form trees 6 levels deep; a
// quarter of them are shared with a group of levels 2 to 4. Each document is in a
// folder, has an owner (Pareto over users) and is shared with a group of levels 2 to
// 4, a fifth with a second group of levels 1 to 4 (shares pick groups uniformly):
// access comes through long chains of nested groups, and a random user reaches a
// small share of the documents.
//
// Document d<i> for i below the user count is shared with an ancestor (levels 2 to 4,
// by primary parents) of user u<i>'s first group, so that a check of document:d<i>
// view for user:u<i> is positive through a long chain: workloads draw such pairs with
// one generator for both (see workloads/deepgroups.yaml).
type DeepGroups struct {
	Groups, Users, Folders, Documents int
	Seed                              uint64
}

const (
	// GroupLevels is the depth of the group DAG; the longest chain of nested groups has
	// GroupLevels-1 edges.
	GroupLevels = 12
	// DeepTopGroups is the number of top-level groups (fewer when there are fewer groups).
	DeepTopGroups = 10
	folderLevels  = 6
	levelGrowth   = 1.9
)

// DeepGroupsFor is the data set in the reference proportions for users users.
func DeepGroupsFor(users int, seed uint64) DeepGroups {
	return DeepGroups{Groups: max(1, users/2), Users: users, Folders: max(1, users/4), Documents: max(1, users*5/2), Seed: seed}
}

// Resized returns d with the sizes given replacing its own; 0 keeps a size.
func (d DeepGroups) Resized(groups, folders, documents int) DeepGroups {
	for _, s := range []struct {
		dst *int
		n   int
	}{{&d.Groups, groups}, {&d.Folders, folders}, {&d.Documents, documents}} {
		if s.n > 0 {
			*s.dst = s.n
		}
	}
	return d
}

// Name is the data set's name on the command line.
func (d DeepGroups) Name() string { return "deepgroups" }

// Schema is the data set's schema.
func (d DeepGroups) Schema() string { return DeepGroupsSchema }

// Estimate is about how many relationships Generate yields: 1.25 edges per group below
// the top, 1.3 memberships per user, a parent for every folder not at the top and
// a quarter of a share, three relationships per document and a fifth of a second share.
func (d DeepGroups) Estimate() int {
	return int(1.25*float64(d.Groups) + 1.3*float64(d.Users) + 1.25*float64(d.Folders) + 3.2*float64(d.Documents))
}

// Generate yields every relationship of the data set in a fixed order; the same seed
// yields the same data. It stops at the first error yield returns. It keeps each
// group's first parent and each user's first group (8 bytes per group and user), to
// share document d<i> along user u<i>'s chain.
func (d DeepGroups) Generate(yield func(rel.Relationship) error) error {
	for _, s := range []struct {
		name string
		n    int
	}{{"groups", d.Groups}, {"users", d.Users}, {"folders", d.Folders}, {"documents", d.Documents}} {
		if s.n <= 0 {
			return fmt.Errorf("the deepgroups data set needs at least 1 of %s, got %d", s.name, s.n)
		}
	}
	rnd := rand.New(rand.NewPCG(d.Seed, 0xdee9))
	g := &deepGen{
		d: d, rnd: rnd, yield: yield,
		groups:  newLevels(d.Groups, DeepTopGroups, GroupLevels, rnd, d.Seed),
		folders: newLevels(d.Folders, max(1, d.Folders/100), folderLevels, rnd, d.Seed^0xf01d),
		owners:  dist.Spec{Kind: dist.Pareto, N: d.Users, Seed: d.Seed ^ 0x0e}.New(rnd),
	}
	for _, step := range []func() error{g.groupEdges, g.users, g.folderEdges, g.documents} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// levels splits the ids [0, n) into consecutive levels, the first of first ids and the
// others growing by levelGrowth, with a Pareto-shaped sampler over each level.
type levels struct {
	start, size []int
	pick        []dist.Sampler
}

func newLevels(n, first, count int, rnd *rand.Rand, seed uint64) levels {
	first = min(first, n)
	sizes := []int{first}
	rest := n - first
	weights, total := make([]float64, count-1), 0.0
	for i := range weights {
		weights[i] = math.Pow(levelGrowth, float64(i))
		total += weights[i]
	}
	for i, w := range weights {
		k := int(float64(rest) * w / total)
		if i == len(weights)-1 {
			k = n - sum(sizes)
		}
		if k > 0 {
			sizes = append(sizes, k)
		}
	}
	var l levels
	at := 0
	for i, k := range sizes {
		l.start, l.size = append(l.start, at), append(l.size, k)
		l.pick = append(l.pick, dist.Spec{Kind: dist.Pareto, N: k, Seed: seed + uint64(i)}.New(rnd))
		at += k
	}
	return l
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// draw returns an id of level i (clamped to the levels there are), Pareto-shaped.
func (l *levels) draw(i int) int {
	i = min(max(i, 0), len(l.size)-1)
	return l.start[i] + l.pick[i].Next()
}

// any returns an id of level i (clamped to the levels there are), uniformly.
func (l *levels) any(rnd *rand.Rand, i int) int {
	i = min(max(i, 0), len(l.size)-1)
	return l.start[i] + rnd.IntN(l.size[i])
}

type deepGen struct {
	d       DeepGroups
	rnd     *rand.Rand
	yield   func(rel.Relationship) error
	groups  levels
	folders levels
	owners  dist.Sampler
	parent  []int32 // by group: its first parent, -1 at the top
	first   []int32 // by user: the group of its first membership
}

// groupEdges nests every group below the top in a parent one level up and a quarter
// of them in a second parent further up.
func (g *deepGen) groupEdges() error {
	g.parent = make([]int32, g.d.Groups)
	for lv := range g.groups.size {
		for c := g.groups.start[lv]; c < g.groups.start[lv]+g.groups.size[lv]; c++ {
			g.parent[c] = -1
			if lv == 0 {
				continue
			}
			p := g.groups.draw(lv - 1)
			g.parent[c] = int32(p)
			if err := g.yield(setEdge("group", Group(p), "member", "group", Group(c), "member")); err != nil {
				return err
			}
			if lv >= 2 && g.rnd.IntN(4) == 0 {
				q := g.groups.draw(g.rnd.IntN(lv - 1))
				if err := g.yield(setEdge("group", Group(q), "member", "group", Group(c), "member")); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// users places each user in a group of the deepest levels, and 30% in a second group
// of any level.
func (g *deepGen) users() error {
	deepest := len(g.groups.size) - 1
	g.first = make([]int32, g.d.Users)
	for u := range g.d.Users {
		lv := deepest
		switch x := g.rnd.IntN(100); {
		case x >= 95:
			lv -= 2
		case x >= 85:
			lv--
		}
		grp := g.groups.draw(lv)
		g.first[u] = int32(grp)
		if err := g.yield(edge("group", Group(grp), "member", "user", User(u))); err != nil {
			return err
		}
		if g.rnd.IntN(10) < 3 {
			other := g.groups.draw(g.rnd.IntN(deepest + 1))
			if other == grp {
				continue
			}
			if err := g.yield(edge("group", Group(other), "member", "user", User(u))); err != nil {
				return err
			}
		}
	}
	return nil
}

// folderEdges puts every folder below the top in a parent one level up and shares a
// quarter of them with a high-level group.
func (g *deepGen) folderEdges() error {
	for lv := range g.folders.size {
		for f := g.folders.start[lv]; f < g.folders.start[lv]+g.folders.size[lv]; f++ {
			if lv > 0 {
				p := g.folders.start[lv-1] + g.rnd.IntN(g.folders.size[lv-1])
				if err := g.yield(edge("folder", Folder(f), "parent", "folder", Folder(p))); err != nil {
					return err
				}
			}
			if g.rnd.IntN(4) == 0 {
				grp := g.groups.any(g.rnd, 2+g.rnd.IntN(3))
				if err := g.yield(setEdge("folder", Folder(f), "viewer", "group", Group(grp), "member")); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (g *deepGen) documents() error {
	for i := range g.d.Documents {
		doc := Document(i)
		if err := g.yield(edge("document", doc, "parent", "folder", Folder(g.rnd.IntN(g.d.Folders)))); err != nil {
			return err
		}
		if err := g.yield(edge("document", doc, "owner", "user", User(g.owners.Next()))); err != nil {
			return err
		}
		lv := 2 + g.rnd.IntN(3)
		grp := g.groups.any(g.rnd, lv)
		if i < g.d.Users {
			grp = g.ancestor(int(g.first[i]), lv)
		}
		if err := g.yield(setEdge("document", doc, "viewer", "group", Group(grp), "member")); err != nil {
			return err
		}
		if g.rnd.IntN(5) == 0 {
			if other := g.groups.any(g.rnd, 1+g.rnd.IntN(4)); other != grp {
				if err := g.yield(setEdge("document", doc, "viewer", "group", Group(other), "member")); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ancestor follows grp's first parents up to level lv (or the top, or grp itself when
// it is at lv or above).
func (g *deepGen) ancestor(grp, lv int) int {
	lv = min(lv, len(g.groups.size)-1)
	end := g.groups.start[lv] + g.groups.size[lv]
	for grp >= end && g.parent[grp] >= 0 {
		grp = int(g.parent[grp])
	}
	return grp
}

// Group, Folder and Document name the i-th object of each type.
func Group(i int) string    { return "g" + strconv.Itoa(i) }
func Folder(i int) string   { return "f" + strconv.Itoa(i) }
func Document(i int) string { return "d" + strconv.Itoa(i) }

func setEdge(rt, rid, relation, st, sid, srel string) rel.Relationship {
	r := edge(rt, rid, relation, st, sid)
	r.Subject.Relation = srel
	return r
}
