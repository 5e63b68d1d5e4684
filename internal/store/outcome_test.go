package store_test

import (
	"errors"
	"testing"

	"github.com/latch-authz/latch/internal/store"
)

func TestIdempotentAndOutcomeUnknown(t *testing.T) {
	pre := []store.Precondition{{Op: store.MustMatch}}
	for _, tc := range []struct {
		name    string
		pre     []store.Precondition
		updates []store.Update
		want    bool
	}{
		{"touches and deletes", nil, []store.Update{{Op: store.Touch}, {Op: store.Delete}}, true},
		{"nothing", nil, nil, true},
		{"a create", nil, []store.Update{{Op: store.Touch}, {Op: store.Create}}, false},
		{"a precondition", pre, []store.Update{{Op: store.Touch}}, false},
	} {
		if got := store.Idempotent(tc.pre, tc.updates); got != tc.want {
			t.Errorf("%s: Idempotent = %v, want %v", tc.name, got, tc.want)
		}
		err := store.OutcomeUnknown(tc.want, errors.New("conn closed"))
		if errors.Is(err, store.ErrUnavailable) != tc.want || errors.Is(err, store.ErrCommitUnknown) == tc.want {
			t.Errorf("%s: OutcomeUnknown = %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		pre     []store.Precondition
		limit   int
		partial bool
		want    bool
	}{
		{nil, 0, false, true},
		{nil, 10, false, true},
		{nil, 0, true, true},
		{nil, 10, true, false},
		{pre, 0, false, false},
	} {
		if got := store.DeleteIdempotent(tc.pre, tc.limit, tc.partial); got != tc.want {
			t.Errorf("DeleteIdempotent(%v, %d, %v) = %v, want %v", tc.pre, tc.limit, tc.partial, got, tc.want)
		}
	}
}
