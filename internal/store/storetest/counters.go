package storetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/latch-authz/latch/internal/store"
)

// counterFilters cover every field of a filter, a nil and an empty slice, and a subject
// relation that is set to the ellipsis or left unset; each must come back exactly.
var counterFilters = map[string]store.Filter{
	"everything": {},
	"docs":       {ResourceType: "document"},
	"full": {
		ResourceType: "document", ResourceIDs: []string{"a", "b/c", "é"}, ResourceIDPrefix: "pre|",
		Relation: "viewer", IncludeExpired: true,
		Subject: &store.SubjectFilter{Type: "group", IDs: []string{"eng"}, Relation: "member", RelationSet: true},
	},
	"ellipsis": {ResourceIDs: []string{}, Subject: &store.SubjectFilter{Type: "user", IDs: []string{}, RelationSet: true}},
	"unset":    {Subject: &store.SubjectFilter{Relation: "ignored"}},
}

func testCounters(h *harness) {
	head := h.head()
	_, err := h.s.CounterFilter(h.ctx, "docs")
	h.expectErr(err, store.ErrCounterUnknown)
	for name, f := range counterFilters {
		if err := h.s.RegisterCounter(h.ctx, name, f); err != nil {
			h.t.Fatalf("register %q: %v", name, err)
		}
	}
	h.expectErr(h.s.RegisterCounter(h.ctx, "docs", store.Filter{ResourceType: "folder"}), store.ErrCounterExists)
	h.expectCounters(counterFilters)
	if got := h.head(); got != head {
		h.t.Fatalf("registering counters moved the head from %d to %d", head, got)
	}

	// The store keeps its own copy: changing the caller's filter changes nothing.
	f := store.Filter{ResourceIDs: []string{"x"}, Subject: &store.SubjectFilter{Type: "user"}}
	if err := h.s.RegisterCounter(h.ctx, "copied", f); err != nil {
		h.t.Fatal(err)
	}
	f.ResourceIDs[0], f.Subject.Type = "y", "team"
	if got, err := h.s.CounterFilter(h.ctx, "copied"); err != nil || got.ResourceIDs[0] != "x" || got.Subject.Type != "user" {
		h.t.Fatalf("filter of %q after the caller changed its own: %+v, %v", "copied", got, err)
	}

	if err := h.s.UnregisterCounter(h.ctx, "docs"); err != nil {
		h.t.Fatal(err)
	}
	h.expectErr(h.s.UnregisterCounter(h.ctx, "docs"), store.ErrCounterUnknown)
	h.expectErr(h.s.UnregisterCounter(h.ctx, "never"), store.ErrCounterUnknown)
	_, err = h.s.CounterFilter(h.ctx, "docs")
	h.expectErr(err, store.ErrCounterUnknown)
	// The name is free again.
	folders := store.Filter{ResourceType: "folder"}
	if err := h.s.RegisterCounter(h.ctx, "docs", folders); err != nil {
		h.t.Fatalf("registering a name again after unregistering it: %v", err)
	}
	h.expectCounters(map[string]store.Filter{"docs": folders, "full": counterFilters["full"]})

	if err := h.s.RegisterCounter(h.ctx, "bad", store.Filter{ResourceType: "doc\xff"}); err == nil {
		h.t.Fatal("a filter that is not UTF-8 was registered; it cannot be stored exactly")
	}
	_, err = h.s.CounterFilter(h.ctx, "bad")
	h.expectErr(err, store.ErrCounterUnknown)
	testCounterRace(h)
}

// testCounterRace registers one name from several goroutines: exactly one wins.
func testCounterRace(h *harness) {
	const racers = 8
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			errs[i] = h.s.RegisterCounter(h.ctx, "raced", store.Filter{ResourceIDs: []string{string(rune('a' + i))}})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrCounterExists):
			h.t.Fatalf("racing registration: %v", err)
		}
	}
	if won != 1 {
		h.t.Fatalf("%d of %d racing registrations of one name succeeded; want 1", won, racers)
	}
}

// expectCounters fails the test unless each name's registered filter is exactly want's.
func (h *harness) expectCounters(want map[string]store.Filter) {
	h.t.Helper()
	for name, w := range want {
		got, err := h.s.CounterFilter(h.ctx, name)
		if err != nil || !reflect.DeepEqual(got, w) {
			h.t.Fatalf("filter of counter %q: %+v, %v;\nwant %+v", name, got, err, w)
		}
	}
}

// CountersSurviveReopen is for durable stores: it registers want and a counter it then
// unregisters on s, closes s, and checks on the store reopen opens over the same data
// that the registrations, and only they, are there, and that their names are taken.
// reopen must return a store that is closed when the test ends.
func CountersSurviveReopen(t *testing.T, s store.Store, reopen func() store.Store, want map[string]store.Filter) {
	t.Helper()
	ctx := context.Background()
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
	s = reopen()
	for name, w := range want {
		if got, err := s.CounterFilter(ctx, name); err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("counter %q after reopen: %+v, %v; want %+v", name, got, err, w)
		}
		if err := s.RegisterCounter(ctx, name, store.Filter{}); !errors.Is(err, store.ErrCounterExists) {
			t.Errorf("registering %q, taken before the reopen: %v; want %v", name, err, store.ErrCounterExists)
		}
	}
	if _, err := s.CounterFilter(ctx, "gone"); !errors.Is(err, store.ErrCounterUnknown) {
		t.Errorf("unregistered counter after reopen: %v; want %v", err, store.ErrCounterUnknown)
	}
}
