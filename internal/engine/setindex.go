package engine

import (
	"context"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// SetIndex is an index of nested sets kept beside the datastore (package
// materialize, wired in by the server): for the relations it holds, it can tell
// whether a subject is in a set at a revision without walking the sets in between.
// Its answers must be exactly the evaluation's, or none: answers are the same with an
// index or without.
type SetIndex interface {
	// Indexes reports whether the index holds relation r.
	Indexes(r *ir.Relation) bool
	// View returns what the index knows of subject's sets at rev, or nil when it
	// cannot answer at rev.
	View(ctx context.Context, rev store.Revision, subject rel.SubjectRef) SetView
}

// SetView is a SetIndex's answers for one subject at one revision, used by one
// request at a time: whether the subject has relation r on object id, reached with
// depth hops left, as evaluation would answer; known is false when the index cannot
// say. (A function type, so that an index need not import the engine to be one.)
type SetView = func(r *ir.Relation, id string, depth int) (yes, known bool)

// indexed asks the engine's index about subproblem r on id, which it answers when
// known is true.
func (ev *evaluator) indexed(ctx context.Context, r *ir.Relation, id string, depth int) (o outcome, known bool) {
	if !ev.index.Indexes(r) {
		return outcome{}, false
	}
	if !ev.viewKnown {
		ev.view, ev.viewKnown = ev.index.View(ctx, ev.r.Revision(), ev.subject), true
	}
	if ev.view == nil {
		return outcome{}, false
	}
	yes, known := ev.view(r, id, depth)
	if yes {
		return outHas, known
	}
	return outNo, known
}
