package store

import "github.com/latch-authz/latch/internal/rel"

// DuplicateUpdateError is returned by Write when one batch updates the same relationship
// (same key, whatever the caveat or expiration) more than once; SpiceDB refuses such
// batches because their outcome would depend on the order of the updates.
type DuplicateUpdateError struct{ Relationship rel.Relationship }

func (e *DuplicateUpdateError) Error() string {
	return "relationship " + rel.String(e.Relationship) +
		" is updated more than once in one write; update each relationship at most once per write"
}

// InvalidUpdateError is returned by Write when an update cannot be applied as given (an
// unknown operation, a caveat without a name); nothing was written.
type InvalidUpdateError struct {
	Update Update
	Reason string
}

func (e *InvalidUpdateError) Error() string {
	return "invalid update of relationship " + rel.String(e.Update.Relationship) + ": " + e.Reason
}
