// Package relcounter owns named relationship counters (SpiceDB's experimental
// relationship counters): a filter registered under a name, whose matching
// relationships are counted on demand at whatever revision the caller reads. The
// registrations live in the datastore (store.Counters), so they are as durable as the
// relationships they count, and every server on the same datastore sees the same
// ones. This package names the counter in the errors the API reports for a name
// that is taken or unknown.
package relcounter

import (
	"context"
	"errors"
	"fmt"

	"github.com/latch-authz/latch/internal/store"
)

// ExistsError: a counter with that name is already registered.
type ExistsError struct{ Name string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("counter with name `%s` already registered", e.Name)
}

// UnknownError: no counter has that name.
type UnknownError struct{ Name string }

func (e *UnknownError) Error() string {
	return fmt.Sprintf("counter with name `%s` not found", e.Name)
}

// Register names f in cs; the name must be new.
func Register(ctx context.Context, cs store.Counters, name string, f store.Filter) error {
	return named(name, cs.RegisterCounter(ctx, name, f))
}

// Unregister forgets the counter named name.
func Unregister(ctx context.Context, cs store.Counters, name string) error {
	return named(name, cs.UnregisterCounter(ctx, name))
}

// Filter is the filter registered under name.
func Filter(ctx context.Context, cs store.Counters, name string) (store.Filter, error) {
	f, err := cs.CounterFilter(ctx, name)
	return f, named(name, err)
}

// named turns the store's sentinels for a taken or unknown name into the errors that
// name the counter; other errors pass unchanged.
func named(name string, err error) error {
	switch {
	case errors.Is(err, store.ErrCounterExists):
		return &ExistsError{name}
	case errors.Is(err, store.ErrCounterUnknown):
		return &UnknownError{name}
	}
	return err
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
