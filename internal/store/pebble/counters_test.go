package pebble

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/latch-authz/latch/internal/store"
)

// TestCountersSurviveReopen registers counters, closes the store and opens the
// directory again: the registrations are there, the removed one is not. One name ends
// in bytes that look like a version suffix, which the counter key's terminator keeps
// from being read as one.
func TestCountersSurviveReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openDir(t, dir, Options{})
	suffixLike := "n\x00\x00\x00\x00\x00\x00\x00\x00\x01\t"
	want := map[string]store.Filter{
		"docs":     {ResourceType: "document", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice"}, RelationSet: true}},
		suffixLike: {ResourceIDPrefix: "a"},
	}
	for name, f := range want {
		if err := s.RegisterCounter(ctx, name, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RegisterCounter(ctx, "gone", store.Filter{}); err != nil {
		t.Fatal(err)
	}
	if err := s.UnregisterCounter(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterCounter(ctx, "late", store.Filter{}); !errors.Is(err, errClosed) {
		t.Fatalf("register on a closed store: %v; want %v", err, errClosed)
	}

	s = openDir(t, dir, Options{})
	for name, w := range want {
		if got, err := s.CounterFilter(ctx, name); err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("counter %q after reopen: %+v, %v; want %+v", name, got, err, w)
		}
	}
	if _, err := s.CounterFilter(ctx, "gone"); !errors.Is(err, store.ErrCounterUnknown) {
		t.Errorf("unregistered counter after reopen: %v; want %v", err, store.ErrCounterUnknown)
	}
	if err := s.RegisterCounter(ctx, "docs", store.Filter{}); !errors.Is(err, store.ErrCounterExists) {
		t.Errorf("registering a name taken before the reopen: %v; want %v", err, store.ErrCounterExists)
	}
}
