package pebble

import (
	"context"
	"errors"
	"testing"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/storetest"
)

// TestCountersSurviveReopen registers counters, closes the store and opens the
// directory again: the registrations are there, the removed one is not. One name ends
// in bytes that look like a version suffix, which the counter key's terminator keeps
// from being read as one.
func TestCountersSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir, Options{})
	storetest.CountersSurviveReopen(t, s, func() store.Store { return openDir(t, dir, Options{}) }, map[string]store.Filter{
		"docs": {ResourceType: "document", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice"}, RelationSet: true}},
		"n\x00\x00\x00\x00\x00\x00\x00\x00\x01\t": {ResourceIDPrefix: "a"},
	})
	if err := s.RegisterCounter(context.Background(), "late", store.Filter{}); !errors.Is(err, errClosed) {
		t.Fatalf("register on a closed store: %v; want %v", err, errClosed)
	}
}
