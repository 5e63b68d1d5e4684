package dataset

import (
	"fmt"
	"strconv"

	"github.com/latch-authz/latch/internal/rel"
)

// Permify is the data set of Permify's published load test (../shared/workloads/permify),
// written through the SpiceDB API: the Permify schema's boolean attribute is_public
// becomes the social schema's wildcards (user:i#follower@user:* and
// content:i#public@user:*), which the social schema's view permissions read exactly as
// Permify's read is_public. Ids are plain numbers, as in Permify's script.
type Permify struct {
	Users int
}

// Name is the data set's name on the command line.
func (p Permify) Name() string { return "permify" }

// Schema is the social schema, the SpiceDB form of Permify's.
func (p Permify) Schema() string { return SocialSchema }

// Estimate is how many relationships Generate yields: six per id and one more for
// every fourth id's two public markers.
func (p Permify) Estimate() int { return 6*p.Users + 2*((p.Users+3)/4) }

// Generate yields, for each id i: self, follower (i+1)%N, blocked (i+2)%N, content owner,
// interaction creator and parent, and the public markers when i%4 == 0.
func (p Permify) Generate(yield func(rel.Relationship) error) error {
	n := p.Users
	if n <= 0 {
		return fmt.Errorf("the permify data set needs at least 1 id, got %d", n)
	}
	for i := range n {
		id := strconv.Itoa(i)
		edges := []rel.Relationship{
			edge("user", id, "self", "user", id),
			edge("user", id, "follower", "user", strconv.Itoa((i+1)%n)),
			edge("user", id, "blocked", "user", strconv.Itoa((i+2)%n)),
			edge("content", id, "owner", "user", id),
			edge("interaction", id, "creator", "user", id),
			edge("interaction", id, "parent", "content", id),
		}
		if i%4 == 0 {
			edges = append(edges, edge("user", id, "follower", "user", rel.Wildcard),
				edge("content", id, "public", "user", rel.Wildcard))
		}
		for _, e := range edges {
			if err := yield(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Dataset is a generated data set: a schema and a stream of relationships.
type Dataset interface {
	Name() string
	Schema() string
	// Estimate is about how many relationships Generate yields, for progress bars.
	Estimate() int
	Generate(yield func(rel.Relationship) error) error
}

// Names lists the data sets ByName knows.
var Names = []string{"social", "permify", "deepgroups"}

// ByName returns the data set called name with the given size and seed.
func ByName(name string, users int, seed uint64) (Dataset, error) {
	if users <= 0 {
		return nil, fmt.Errorf("data set %q needs --users > 0, got %d", name, users)
	}
	switch name {
	case "social":
		return Social{Users: users, Seed: seed}, nil
	case "permify":
		return Permify{Users: users}, nil
	case "deepgroups":
		return DeepGroupsFor(users, seed), nil
	}
	return nil, fmt.Errorf("unknown data set %q (want social, permify or deepgroups)", name)
}
