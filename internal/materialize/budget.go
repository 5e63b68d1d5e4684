package materialize

import "sync/atomic"

// Budget is a memory bound that indexes share: a server's own index and its Permify
// tenants' draw on one, so that the bound holds for all of them together. Each build
// of an index charges what it holds to its budget and gives it back when it is let
// go (a rebuild, the index stopping).
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes (DefaultMaxBytes when max ≤ 0).
func NewBudget(max int64) *Budget {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	return &Budget{max: max}
}

// Used is what the indexes drawing on b hold, in bytes.
func (b *Budget) Used() int64 { return b.used.Load() }
