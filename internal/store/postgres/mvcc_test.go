package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres"
)

func docRel(resource, subject string) rel.Relationship {
	return rel.Relationship{
		Resource: rel.ObjectRef{Type: "doc", ID: resource}, Relation: "viewer",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: subject}},
	}
}

// readAll returns the resource ids of every relationship at rev.
func readAll(ctx context.Context, s store.Store, rev store.Revision) ([]string, error) {
	r, err := s.Reader(ctx, rev)
	if err != nil {
		return nil, err
	}
	var ids []string
	for item, err := range r.Query(ctx, store.Filter{ResourceType: "doc"}, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		ids = append(ids, item.Relationship.Resource.ID)
	}
	return ids, nil
}

// TestConcurrentWritersExactRevisions runs writers that each create one new
// relationship per write while readers read at the head. Afterwards every revision
// must show exactly the relationships of the writes at or below it, and every read
// taken during the run must have seen exactly that too. The first writer waits after
// each write until a reader has read at or past its revision, so the reads are taken
// between writes however the scheduler runs them: at least one per write of its.
func TestConcurrentWritersExactRevisions(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx := context.Background()
	const writers, writes, readers = 6, 25, 3

	var mu sync.Mutex
	written := map[store.Revision]string{} // guarded by mu: revision → resource created
	observed := map[store.Revision][]string{}
	var newest store.Revision // guarded by mu: the newest revision a reader has read
	readPast := func(rev store.Revision) error {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
			mu.Lock()
			read := newest >= rev
			mu.Unlock()
			if read {
				return nil
			}
		}
		return fmt.Errorf("no reader read revision %d within 30 s", rev)
	}
	var wg, rwg sync.WaitGroup
	errs := make(chan error, writers+readers)
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				id := fmt.Sprintf("w%d-%03d", w, i)
				rev, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: docRel(id, "u")}}, nil)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if prev, dup := written[rev]; dup {
					errs <- fmt.Errorf("revision %d returned to two writes (%s and %s)", rev, prev, id)
				}
				written[rev] = id
				mu.Unlock()
				if w == 0 {
					if err := readPast(rev); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	for range readers {
		rwg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				rev, err := s.HeadRevision(ctx)
				if err != nil {
					errs <- err
					return
				}
				ids, err := readAll(ctx, s, rev)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				observed[rev] = ids
				newest = max(newest, rev)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(done)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	head, err := s.HeadRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != writers*writes {
		t.Fatalf("%d writes got revisions, want %d", len(written), writers*writes)
	}
	// Replay the writes in revision order and compare every revision.
	var want []string
	for rev := store.Revision(1); rev <= head; rev++ {
		if id, ok := written[rev]; ok {
			want = append(want, id)
		}
		wantSorted := slices.Sorted(slices.Values(want))
		got, err := readAll(ctx, s, rev)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, wantSorted) {
			t.Fatalf("revision %d shows %d relationships, want the %d written at or before it", rev, len(got), len(wantSorted))
		}
		if seen, ok := observed[rev]; ok && !slices.Equal(seen, wantSorted) {
			t.Fatalf("a read at revision %d during the run saw %d relationships, want %d", rev, len(seen), len(wantSorted))
		}
	}
	if len(observed) < 5 {
		t.Fatalf("readers observed only %d revisions; the test did not overlap reads and writes", len(observed))
	}
}

// TestConcurrentPreconditions races writers that each claim a lock guarded by a
// MustNotMatch precondition: exactly one may win, even though each checked the
// precondition at a base revision where nobody held the lock.
func TestConcurrentPreconditions(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx := context.Background()
	lockFilter := store.Filter{ResourceType: "lock", ResourceIDs: []string{"l"}}
	pre := []store.Precondition{{Op: store.MustNotMatch, Filter: lockFilter}}
	for round := range 5 {
		id := fmt.Sprint("l", round)
		lockFilter.ResourceIDs = []string{id}
		pre[0].Filter = lockFilter
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		start := make(chan struct{})
		for g := range 8 {
			wg.Go(func() {
				claim := rel.Relationship{
					Resource: rel.ObjectRef{Type: "lock", ID: id}, Relation: "holder",
					Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("g", g)}},
				}
				<-start
				_, err := s.Write(ctx, pre, []store.Update{{Op: store.Create, Relationship: claim}}, nil)
				var failed *store.PreconditionFailedError
				switch {
				case err == nil:
					mu.Lock()
					wins++
					mu.Unlock()
				case !errors.As(err, &failed):
					t.Errorf("claim: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		head, _ := s.HeadRevision(ctx)
		r, err := s.Reader(ctx, head)
		if err != nil {
			t.Fatal(err)
		}
		holders := 0
		for _, err := range r.Query(ctx, lockFilter, store.QueryOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			holders++
		}
		if wins != 1 || holders != 1 {
			t.Fatalf("round %d: %d claims succeeded and the lock has %d holders, want 1 and 1", round, wins, holders)
		}
	}
}

// TestValidatorSeesBaseInsideTransaction checks that the validator's reader reads at
// the revision the write starts from, and that a schema write's validator may read.
func TestValidatorSeesBaseInsideTransaction(t *testing.T) {
	s, _ := open(t, postgres.Options{})
	ctx := context.Background()
	base, err := s.Write(ctx, nil, []store.Update{{Op: store.Create, Relationship: docRel("a", "u")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	rev, err := s.WriteSchema(ctx, "definition doc {}", func(ctx context.Context, r store.Reader) error {
		if r.Revision() != base {
			return fmt.Errorf("validator reads at %d, want %d", r.Revision(), base)
		}
		var err error
		seen, err = readAllReader(ctx, r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if rev != base+1 || !slices.Equal(seen, []string{"a"}) {
		t.Fatalf("schema write at %d saw %q; want revision %d and [a]", rev, seen, base+1)
	}
}

func readAllReader(ctx context.Context, r store.Reader) ([]string, error) {
	var ids []string
	for item, err := range r.Query(ctx, store.Filter{}, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		ids = append(ids, item.Relationship.Resource.ID)
	}
	return ids, nil
}
