package store

import (
	"context"
	"fmt"

	"github.com/latch-authz/latch/internal/rel"
)

// The checks of a write that read the same on every backend. Each backend calls them
// before it changes anything; one with further limits of its own checks them after.

// CheckUpdate refuses an unknown operation and, outside deletes, a caveat without a
// name.
func CheckUpdate(u Update) error {
	if u.Op < Create || u.Op > Delete {
		return &InvalidUpdateError{Update: u, Reason: "unknown operation"}
	}
	if c := u.Relationship.Caveat; c != nil && c.Name == "" && u.Op != Delete {
		return &InvalidUpdateError{Update: u, Reason: "caveat has no name"}
	}
	return nil
}

// CheckUpdates checks each update (CheckUpdate) and refuses a batch that updates one
// relationship twice.
func CheckUpdates(updates []Update) error {
	var seen map[rel.Key]struct{}
	if len(updates) > 1 {
		seen = make(map[rel.Key]struct{}, len(updates))
	}
	for _, u := range updates {
		if err := CheckUpdate(u); err != nil {
			return err
		}
		if seen == nil {
			continue
		}
		k := u.Relationship.Key()
		if _, dup := seen[k]; dup {
			return &DuplicateUpdateError{Relationship: u.Relationship}
		}
		seen[k] = struct{}{}
	}
	return nil
}

// CheckPreconditions evaluates each precondition with r, the reader a backend's write
// transaction sees, and returns a *PreconditionFailedError for the first that does not
// hold.
func CheckPreconditions(ctx context.Context, r Reader, preconditions []Precondition) error {
	for _, p := range preconditions {
		if p.Op != MustMatch && p.Op != MustNotMatch {
			return fmt.Errorf("precondition on %s has an unknown operation %d", p.Filter, p.Op)
		}
		found := false
		for _, err := range r.Query(ctx, p.Filter, QueryOptions{Limit: 1}) {
			if err != nil {
				return err
			}
			found = true
		}
		if found != (p.Op == MustMatch) {
			return &PreconditionFailedError{Precondition: p}
		}
	}
	return nil
}
