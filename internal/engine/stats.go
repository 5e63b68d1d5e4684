package engine

import (
	"context"
	"sync/atomic"
)

// Stats counts the work of one request, for clients told what a call cost (SpiceDB's
// response metadata). Dispatched counts subproblem evaluations: one for each relation
// or permission evaluated on a set of resources, as SpiceDB counts one dispatch for
// each. Cached counts those answered from the cache of subproblem answers instead.
// Answers repeated within the request (its memo) count in neither.
type Stats struct {
	Dispatched atomic.Int64
	Cached     atomic.Int64
}

type statsKey struct{}

// WithStats returns a context under which the engine counts its work in st. The
// count travels in the context, like the request id it is reported beside, so that
// the engine's API (and every caller that does not ask) stays unchanged.
func WithStats(ctx context.Context, st *Stats) context.Context {
	return context.WithValue(ctx, statsKey{}, st)
}

// statsFrom returns the Stats ctx counts in, or nil.
func statsFrom(ctx context.Context) *Stats {
	st, _ := ctx.Value(statsKey{}).(*Stats)
	return st
}

// count adds one dispatch (when evaluated) and cached answers; a nil Stats counts
// nothing.
func (st *Stats) count(evaluated bool, cached int) {
	if st == nil {
		return
	}
	if evaluated {
		st.Dispatched.Add(1)
	}
	if cached > 0 {
		st.Cached.Add(int64(cached))
	}
}
