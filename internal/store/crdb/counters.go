package crdb

import (
	"context"

	"github.com/latch-authz/latch/internal/store"
)

// RegisterCounter registers f under name (store.Counters, kept by sqlstore.Counters).
func (s *Store) RegisterCounter(ctx context.Context, name string, f store.Filter) error {
	return s.counters.Register(ctx, name, f)
}

// UnregisterCounter removes the counter named name (store.Counters).
func (s *Store) UnregisterCounter(ctx context.Context, name string) error {
	return s.counters.Unregister(ctx, name)
}

// CounterFilter returns the filter registered under name (store.Counters).
func (s *Store) CounterFilter(ctx context.Context, name string) (store.Filter, error) {
	return s.counters.Filter(ctx, name)
}
