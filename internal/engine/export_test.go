package engine

import (
	"context"

	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// LookupSubjectsBySets answers a lookup SubjectsOrdered accepts by set algebra, as
// LookupSubjects answers the others, for tests that hold the two ways to each other.
func (e *Engine) LookupSubjectsBySets(ctx context.Context, s *ir.Schema, r store.Reader, req LookupSubjectsRequest, yield func(FoundSubject) error) error {
	target, err := subjectsTarget(s, req)
	if err != nil {
		return err
	}
	return e.lookupSubjectSets(ctx, s, r, req, target, yield)
}
