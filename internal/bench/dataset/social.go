// Package dataset owns the reference data sets latch is measured on, generated
// deterministically from a seed and streamed, so that sizes far beyond memory work.
package dataset

import (
	"math"
	"math/rand/v2"
	"strconv"

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
type Social struct {
	Users int
	Seed  uint64
}

const (
	paretoAlpha  = 1.5
	meanFollows  = 10.0
	maxFollowers = 20000
)

// Generate yields every relationship of the data set in a fixed order; the same seed
// yields the same data. It stops at the first error yield returns.
func (s Social) Generate(yield func(rel.Relationship) error) error {
	rnd := rand.New(rand.NewPCG(s.Seed, 0x50c1a1))
	n := s.Users
	xm := meanFollows * (paretoAlpha - 1) / paretoAlpha
	for i := range n {
		u := User(i)
		if err := yield(edge("user", u, "self", "user", u)); err != nil {
			return err
		}
		followers := int(xm / math.Pow(1-rnd.Float64(), 1/paretoAlpha))
		followers = min(followers, maxFollowers, n-1)
		seen := make(map[int]struct{}, followers)
		for len(seen) < followers {
			f := rnd.IntN(n)
			if _, dup := seen[f]; dup || f == i {
				continue
			}
			seen[f] = struct{}{}
			if err := yield(edge("user", u, "follower", "user", User(f))); err != nil {
				return err
			}
		}
		if rnd.IntN(100) == 0 {
			if err := yield(edge("user", u, "follower", "user", rel.Wildcard)); err != nil {
				return err
			}
		}
		if err := yield(edge("user", u, "blocked", "user", User(rnd.IntN(n)))); err != nil {
			return err
		}
	}
	for i := range n {
		c := Content(i)
		if err := yield(edge("content", c, "owner", "user", User(rnd.IntN(n)))); err != nil {
			return err
		}
		if rnd.IntN(4) == 0 {
			if err := yield(edge("content", c, "public", "user", rel.Wildcard)); err != nil {
				return err
			}
		}
	}
	for i := range n {
		in := Interaction(i)
		if err := yield(edge("interaction", in, "creator", "user", User(rnd.IntN(n)))); err != nil {
			return err
		}
		if err := yield(edge("interaction", in, "parent", "content", Content(rnd.IntN(n)))); err != nil {
			return err
		}
	}
	return nil
}

// User, Content and Interaction name the i-th object of each type.
func User(i int) string        { return "u" + strconv.Itoa(i) }
func Content(i int) string     { return "c" + strconv.Itoa(i) }
func Interaction(i int) string { return "i" + strconv.Itoa(i) }

func edge(rt, rid, relation, st, sid string) rel.Relationship {
	return rel.Relationship{Resource: rel.ObjectRef{Type: rt, ID: rid}, Relation: relation,
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: st, ID: sid}}}
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
