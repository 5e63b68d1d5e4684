package memory

import (
	"context"

	"github.com/latch-authz/latch/internal/store"
)

// RegisterCounter registers f under name (store.Counters). Registrations live as long
// as the store, like everything else in it.
func (s *Store) RegisterCounter(ctx context.Context, name string, f store.Filter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := store.EncodeCounterFilter(f)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if _, ok := s.counters[name]; ok {
		return store.ErrCounterExists
	}
	s.counters[name] = raw
	return nil
}

// UnregisterCounter removes the counter named name (store.Counters).
func (s *Store) UnregisterCounter(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if _, ok := s.counters[name]; !ok {
		return store.ErrCounterUnknown
	}
	delete(s.counters, name)
	return nil
}

// CounterFilter returns the filter registered under name (store.Counters).
func (s *Store) CounterFilter(ctx context.Context, name string) (store.Filter, error) {
	if err := ctx.Err(); err != nil {
		return store.Filter{}, err
	}
	s.mu.RLock()
	raw, ok := s.counters[name]
	s.mu.RUnlock()
	if !ok {
		return store.Filter{}, store.ErrCounterUnknown
	}
	return store.DecodeCounterFilter(raw)
}
