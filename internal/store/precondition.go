package store

import (
	"context"
	"fmt"
)

// CheckPreconditions evaluates each precondition with r, the reader a backend's write
// transaction sees, and returns a *PreconditionFailedError for the first that does not
// hold. Every backend calls it so that the rule reads the same on all of them.
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
