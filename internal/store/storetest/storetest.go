// Package storetest is the conformance suite every store backend runs: write semantics
// (create, touch, delete, preconditions, validation, atomicity), MVCC reads at old
// revisions, every filter field, key order and cursor paging, expiration, caveats,
// filtered deletes, bulk loads, the stored schema, relationship counter registrations, concurrency
// and cancellation, a randomized comparison against a trivially correct model, and, for
// stores that implement store.Watcher, the change stream. A backend's test calls Run
// with a constructor of fresh, empty stores.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// Run runs the whole suite. newStore must return an empty store that is closed when
// the test ends (t.Cleanup).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(h *harness)
	}{
		{"Empty", testEmpty},
		{"CreateTouchDelete", testCreateTouchDelete},
		{"CreateExisting", testCreateExisting},
		{"CreateOverExpired", testCreateOverExpired},
		{"DuplicateUpdates", testDuplicateUpdates},
		{"InvalidUpdates", testInvalidUpdates},
		{"Preconditions", testPreconditions},
		{"Validator", testValidator},
		{"EmptyAndNoopWrites", testEmptyAndNoopWrites},
		{"OldRevisions", testOldRevisions},
		{"RevisionBounds", testRevisionBounds},
		{"ResourceFilters", testResourceFilters},
		{"SubjectFilters", testSubjectFilters},
		{"FiltersAgainstBruteForce", testFiltersAgainstBruteForce},
		{"OrderAndPaging", testOrderAndPaging},
		{"LargeLimits", testLargeLimits},
		{"CursorAcrossWrites", testCursorAcrossWrites},
		{"InvalidCursor", testInvalidCursor},
		{"Expiration", testExpiration},
		{"Caveats", testCaveats},
		{"DeleteByFilter", testDeleteByFilter},
		{"BulkLoad", testBulkLoad},
		{"Schema", testSchema},
		{"Counters", testCounters},
		{"Concurrency", testConcurrency},
		{"Cancellation", testCancellation},
		{"RandomModel", testRandomModel},
		{"Watch", testWatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(&harness{t: t, s: newStore(t), ctx: context.Background()})
		})
	}
}

// harness bundles a test with its store and fails the test on unexpected errors.
type harness struct {
	t   *testing.T
	s   store.Store
	ctx context.Context
}

// rel parses `type:id#relation@type:id[#relation]`.
func (h *harness) rel(s string) rel.Relationship {
	h.t.Helper()
	x, err := parseRel(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return x
}

func parseRel(s string) (rel.Relationship, error) {
	var x rel.Relationship
	res, subj, ok := strings.Cut(s, "@")
	if !ok {
		return x, fmt.Errorf("relationship %q has no @", s)
	}
	obj, relation, ok := strings.Cut(res, "#")
	if !ok {
		return x, fmt.Errorf("relationship %q has no #relation", s)
	}
	x.Relation = relation
	if x.Resource.Type, x.Resource.ID, ok = strings.Cut(obj, ":"); !ok {
		return x, fmt.Errorf("resource %q has no type", obj)
	}
	sobj, srel, _ := strings.Cut(subj, "#")
	x.Subject.Relation = srel
	if x.Subject.Object.Type, x.Subject.Object.ID, ok = strings.Cut(sobj, ":"); !ok {
		return x, fmt.Errorf("subject %q has no type", sobj)
	}
	return x, nil
}

func (h *harness) rels(ss ...string) []rel.Relationship {
	h.t.Helper()
	out := make([]rel.Relationship, len(ss))
	for i, s := range ss {
		out[i] = h.rel(s)
	}
	return out
}

func updates(op store.Op, rs ...rel.Relationship) []store.Update {
	out := make([]store.Update, len(rs))
	for i, r := range rs {
		out[i] = store.Update{Op: op, Relationship: r}
	}
	return out
}

// write applies updates and fails the test on error.
func (h *harness) write(us ...store.Update) store.Revision {
	h.t.Helper()
	rev, err := h.s.Write(h.ctx, nil, us, nil)
	if err != nil {
		h.t.Fatalf("write: %v", err)
	}
	return rev
}

func (h *harness) create(ss ...string) store.Revision {
	h.t.Helper()
	return h.write(updates(store.Create, h.rels(ss...)...)...)
}

func (h *harness) head() store.Revision {
	h.t.Helper()
	rev, err := h.s.HeadRevision(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return rev
}

func (h *harness) reader(rev store.Revision) store.Reader {
	h.t.Helper()
	r, err := h.s.Reader(h.ctx, rev)
	if err != nil {
		h.t.Fatalf("reader at %d: %v", rev, err)
	}
	return r
}

// query reads every match at rev, failing the test on error.
func (h *harness) query(rev store.Revision, f store.Filter, opts store.QueryOptions) []store.Item {
	h.t.Helper()
	var out []store.Item
	for item, err := range h.reader(rev).Query(h.ctx, f, opts) {
		if err != nil {
			h.t.Fatalf("query %s at %d: %v", f, rev, err)
		}
		out = append(out, item)
	}
	return out
}

// read returns the matches at rev as relationship strings, in the order returned.
func (h *harness) read(rev store.Revision, f store.Filter) []string {
	h.t.Helper()
	return relStrings(h.query(rev, f, store.QueryOptions{}))
}

func relStrings(items []store.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = keyString(it.Relationship.Key())
	}
	return out
}

func keyString(k rel.Key) string {
	s := k.ResourceType + ":" + k.ResourceID + "#" + k.Relation + "@" + k.SubjectType + ":" + k.SubjectID
	if k.SubjectRelation != "" {
		s += "#" + k.SubjectRelation
	}
	return s
}

// expect fails the test unless the matches of f at rev are want, in that order.
func (h *harness) expect(rev store.Revision, f store.Filter, want ...string) {
	h.t.Helper()
	got := h.read(rev, f)
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		h.t.Fatalf("query %s at revision %d:\n got  %q\n want %q", f, rev, got, want)
	}
}

// expectErr fails the test unless err is (or wraps) target; a pointer-to-type target
// is matched with errors.As.
func (h *harness) expectErr(err error, target any) {
	h.t.Helper()
	if err == nil {
		h.t.Fatalf("got no error, want %T %v", target, target)
	}
	if e, ok := target.(error); ok {
		if !errors.Is(err, e) {
			h.t.Fatalf("got error %v, want %v", err, e)
		}
		return
	}
	if !errors.As(err, target) {
		h.t.Fatalf("got error %T %v, want %s", err, err, reflect.TypeOf(target).Elem())
	}
}

// all is the filter matching everything.
var all = store.Filter{}

func sameRelationship(a, b rel.Relationship) bool {
	if a.Key() != b.Key() {
		return false
	}
	if (a.Caveat == nil) != (b.Caveat == nil) || (a.Expiration == nil) != (b.Expiration == nil) {
		return false
	}
	if a.Caveat != nil && (a.Caveat.Name != b.Caveat.Name || !sameContext(a.Caveat.Context, b.Caveat.Context)) {
		return false
	}
	return a.Expiration == nil || a.Expiration.Equal(*b.Expiration)
}

// sameContext compares caveat contexts, treating nil and empty as equal.
func sameContext(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

var (
	past   = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	future = time.Date(2100, 1, 2, 3, 4, 5, 0, time.UTC)
)
