package engine

import "context"

// maxFixpointRounds bounds how often one recursive set is recomputed before the
// lookup gives up with ErrMaxDepth; monotone recursion converges in far fewer rounds.
const maxFixpointRounds = DefaultMaxDepth

// fixpoint memoizes recursive set computations keyed by K within one request. A key
// met again while it is being computed (a back edge through recursive schema and
// data) yields what is known of it so far, and the key is recomputed, merging each
// round into its value, until a round adds nothing: the least fixpoint of the
// recursion. Keys completed inside a round that saw an older value are recomputed with
// it.
type fixpoint[K comparable, V any] struct {
	val      map[K]V
	computed map[K]bool
	onStack  map[K]bool
	backEdge map[K]bool
	order    []K // completed keys, in completion order

	empty func() V
	// merge folds a round's value into the known one and reports whether it grew.
	merge func(known, round V) (V, bool)
}

func newFixpoint[K comparable, V any](empty func() V, merge func(known, round V) (V, bool)) *fixpoint[K, V] {
	return &fixpoint[K, V]{
		val: map[K]V{}, computed: map[K]bool{}, onStack: map[K]bool{},
		backEdge: map[K]bool{}, empty: empty, merge: merge,
	}
}

// done reports whether k's value is computed: final until a round that saw an older
// value of a key it depends on computes it again.
func (f *fixpoint[K, V]) done(k K) bool { return f.computed[k] }

// get returns k's value, computing it with compute (which may call get recursively).
// after, if not nil, is called with the known value after every round.
func (f *fixpoint[K, V]) get(ctx context.Context, k K, compute func() (V, error), after func(V) error) (V, error) {
	if err := ctx.Err(); err != nil {
		return f.empty(), err
	}
	if f.computed[k] {
		return f.val[k], nil
	}
	if _, ok := f.val[k]; !ok {
		f.val[k] = f.empty()
	}
	if f.onStack[k] {
		f.backEdge[k] = true
		return f.val[k], nil
	}
	f.onStack[k] = true
	defer delete(f.onStack, k)
	mark := len(f.order)
	for round := 0; ; round++ {
		if round == maxFixpointRounds {
			return f.empty(), ErrMaxDepth
		}
		f.backEdge[k] = false
		v, err := compute()
		if err != nil {
			return f.empty(), err
		}
		merged, grew := f.merge(f.val[k], v)
		f.val[k] = merged
		if after != nil {
			if err := after(merged); err != nil {
				return f.empty(), err
			}
		}
		if !f.backEdge[k] || !grew {
			break
		}
		for _, c := range f.order[mark:] {
			delete(f.computed, c)
		}
		f.order = f.order[:mark]
	}
	f.computed[k] = true
	f.order = append(f.order, k)
	return f.val[k], nil
}
