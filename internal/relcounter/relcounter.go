// Package relcounter keeps named relationship counters (SpiceDB's experimental
// relationship counters): a registered filter whose matching relationships are counted
// on demand, at whatever revision the caller reads. Registrations live in the
// process's memory: a restart forgets them, and each server of a cluster has its own.
package relcounter

import (
	"context"
	"fmt"
	"sync"

	"github.com/latch-authz/latch/internal/store"
)

// ExistsError: a counter with that name is already registered.
type ExistsError struct{ Name string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("a relationship counter named %q is already registered", e.Name)
}

// UnknownError: no counter has that name.
type UnknownError struct{ Name string }

func (e *UnknownError) Error() string {
	return fmt.Sprintf("no relationship counter named %q is registered", e.Name)
}

// Registry holds the registered counters. The zero value is empty and ready; it is
// safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	filters map[string]store.Filter // guarded by mu
}

// Register names f; the name must be new.
func (c *Registry) Register(name string, f store.Filter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.filters[name]; ok {
		return &ExistsError{name}
	}
	if c.filters == nil {
		c.filters = map[string]store.Filter{}
	}
	c.filters[name] = f
	return nil
}

// Unregister forgets the counter named name.
func (c *Registry) Unregister(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.filters[name]; !ok {
		return &UnknownError{name}
	}
	delete(c.filters, name)
	return nil
}

// Filter is the filter registered under name.
func (c *Registry) Filter(name string) (store.Filter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.filters[name]
	if !ok {
		return store.Filter{}, &UnknownError{name}
	}
	return f, nil
}

// Count counts the relationships matching f that r reads.
func Count(ctx context.Context, r store.Reader, f store.Filter) (uint64, error) {
	var n uint64
	for _, err := range r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
