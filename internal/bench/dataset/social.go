// Package dataset owns the reference data sets latch is measured on, generated
// deterministically from a seed and streamed, so that sizes far beyond memory work.
package dataset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/latch-authz/latch/internal/bench/dist"
	"github.com/latch-authz/latch/internal/rel"
)

// SocialSchema is ../shared/workloads/social/schema.zed.
const SocialSchema = `definition user {
	relation self: user
	relation follower: user | user:*
	relation blocked: user

	// a profile is visible to its owner and followers, never to those the owner blocked
	permission view = (self + follower) - blocked
}

definition content {
	relation owner: user
	relation public: user:*

	// public content is visible to everyone, private content to followers; never to the blocked
	permission view = owner->self + ((public + owner->follower) - owner->blocked)
}

definition interaction {
	relation creator: user
	relation parent: content

	permission view = creator->self + (creator->view & parent->view)
}
`

// Social sizes the social network. The reference size is Users = 100,000 (about 1.5M
// relationships); contents and interactions scale with users.
//
// Activity is Pareto-shaped: who follows, who owns content and who creates
// interactions is drawn so that 20% of users produce 80% of each (dist.ParetoAlpha80,
// through a seeded permutation so the active users are not the low ids). How many
// followers a user has is drawn from Pareto(1.5) with mean 10, capped at 20,000, so a few
// users have thousands. About 1% of follows are blocks instead, 1% of profiles are public
// (follower@user:*) and 25% of contents are public (public@user:*).
type Social struct {
	Users int
	Seed  uint64
}

const (
	paretoAlpha  = 1.5
	meanFollows  = 10.0
	maxFollowers = 20000
)

// Name is the data set's name on the command line.
func (s Social) Name() string { return "social" }

// Schema is the data set's schema.
func (s Social) Schema() string { return SocialSchema }

// Estimate is about how many relationships Generate yields: per user one self, about
// 9.8 follows (the Pareto mean of 10 less the capped tail), a hundredth of a public
// marker, a content with a quarter of a public marker and an interaction with two edges
// (1,406,070 for 100,000 users and seed 1).
func (s Social) Estimate() int { return int(float64(s.Users) * 14.06) }

// Generate yields every relationship of the data set in a fixed order; the same seed
// yields the same data. It stops at the first error yield returns. Memory stays
// proportional to the largest follower count, never to the data set.
func (s Social) Generate(yield func(rel.Relationship) error) error {
	if s.Users <= 0 {
		return fmt.Errorf("the social data set needs at least 1 user, got %d", s.Users)
	}
	rnd := rand.New(rand.NewPCG(s.Seed, 0x50c1a1))
	active := dist.Spec{Kind: dist.Pareto, N: s.Users, Seed: s.Seed ^ 0xac71}.New(rnd)
	g := socialGen{n: s.Users, rnd: rnd, active: active, yield: yield}
	for i := range s.Users {
		if err := g.user(i); err != nil {
			return err
		}
	}
	for i := range s.Users {
		if err := g.content(i); err != nil {
			return err
		}
	}
	for i := range s.Users {
		if err := g.interaction(i); err != nil {
			return err
		}
	}
	return nil
}

type socialGen struct {
	n      int
	rnd    *rand.Rand
	active dist.Sampler
	yield  func(rel.Relationship) error
	seen   map[int]struct{}
}

func (g *socialGen) user(i int) error {
	u := User(i)
	if err := g.yield(edge("user", u, "self", "user", u)); err != nil {
		return err
	}
	if err := g.follows(i, u); err != nil {
		return err
	}
	if g.rnd.IntN(100) == 0 {
		return g.yield(edge("user", u, "follower", "user", rel.Wildcard))
	}
	return nil
}

// follows yields user i's followers, drawn by activity; a hundredth become blocks.
func (g *socialGen) follows(i int, u string) error {
	xm := meanFollows * (paretoAlpha - 1) / paretoAlpha
	k := int(math.Round(xm / math.Pow(1-g.rnd.Float64(), 1/paretoAlpha)))
	k = min(k, maxFollowers, g.n-1)
	if g.seen == nil {
		g.seen = map[int]struct{}{}
	}
	clear(g.seen)
	// The most active users are drawn again and again; after enough tries the rest of
	// the followers come uniformly, so a huge follower count still ends.
	for tries := 0; len(g.seen) < k; tries++ {
		f := g.active.Next()
		if tries > 20*k {
			f = g.rnd.IntN(g.n)
		}
		if _, dup := g.seen[f]; dup || f == i {
			continue
		}
		g.seen[f] = struct{}{}
		relation := "follower"
		if g.rnd.IntN(100) == 0 {
			relation = "blocked"
		}
		if err := g.yield(edge("user", u, relation, "user", User(f))); err != nil {
			return err
		}
	}
	return nil
}

func (g *socialGen) content(i int) error {
	c := Content(i)
	if err := g.yield(edge("content", c, "owner", "user", User(g.active.Next()))); err != nil {
		return err
	}
	if g.rnd.IntN(4) == 0 {
		return g.yield(edge("content", c, "public", "user", rel.Wildcard))
	}
	return nil
}

func (g *socialGen) interaction(i int) error {
	in := Interaction(i)
	if err := g.yield(edge("interaction", in, "creator", "user", User(g.active.Next()))); err != nil {
		return err
	}
	return g.yield(edge("interaction", in, "parent", "content", Content(g.rnd.IntN(g.n))))
}

// User, Content and Interaction name the i-th object of each type.
func User(i int) string        { return "u" + strconv.Itoa(i) }
func Content(i int) string     { return "c" + strconv.Itoa(i) }
func Interaction(i int) string { return "i" + strconv.Itoa(i) }

func edge(rt, rid, relation, st, sid string) rel.Relationship {
	return rel.Relationship{
		Resource: rel.ObjectRef{Type: rt, ID: rid}, Relation: relation,
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: st, ID: sid}},
	}
}

// SocialChecks draws the reference request mix: 60% content#view, 30% user#view, 10%
// interaction#view; resources uniform; subjects Zipf-skewed (s = 1.1) over users
// through a fixed random permutation, so popular subjects are not the low ids.
type SocialChecks struct {
	rnd  *rand.Rand
	zipf *rand.Zipf
	perm []int
	n    int
}

// CheckItem is one drawn check.
type CheckItem struct {
	Resource   rel.ObjectRef
	Permission string
	Subject    rel.SubjectRef
}

// NewSocialChecks returns a request drawer for a data set of users users.
func NewSocialChecks(users int, seed uint64) *SocialChecks {
	rnd := rand.New(rand.NewPCG(seed, 0xc4ec))
	return &SocialChecks{rnd: rnd, zipf: rand.NewZipf(rnd, 1.1, 1, uint64(users-1)), perm: rnd.Perm(users), n: users}
}

// Next draws one check.
func (g *SocialChecks) Next() CheckItem {
	subj := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: User(g.perm[g.zipf.Uint64()])}}
	id := g.rnd.IntN(g.n)
	switch p := g.rnd.IntN(10); {
	case p < 6:
		return CheckItem{rel.ObjectRef{Type: "content", ID: Content(id)}, "view", subj}
	case p < 9:
		return CheckItem{rel.ObjectRef{Type: "user", ID: User(id)}, "view", subj}
	default:
		return CheckItem{rel.ObjectRef{Type: "interaction", ID: Interaction(id)}, "view", subj}
	}
}
