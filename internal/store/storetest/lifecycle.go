package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/latch-authz/latch/internal/store"
)

func testDeleteByFilter(h *harness) {
	base := h.create(
		"document:a#viewer@user:alice", "document:b#viewer@user:alice", "document:c#viewer@user:alice",
		"document:a#owner@user:alice", "folder:f#viewer@user:alice",
	)
	viewers := store.Filter{ResourceType: "document", Relation: "viewer"}

	_, _, _, err := h.s.DeleteByFilter(h.ctx, nil, viewers, 2, false)
	h.expectErr(err, store.ErrTooManyToDelete)
	if h.head() != base {
		h.t.Fatalf("refused delete moved the head from %d to %d", base, h.head())
	}
	failing := []store.Precondition{{Op: store.MustMatch, Filter: store.Filter{ResourceType: "nosuch"}}}
	_, _, _, err = h.s.DeleteByFilter(h.ctx, failing, viewers, 0, false)
	var failed *store.PreconditionFailedError
	h.expectErr(err, &failed)
	h.expect(h.head(), viewers, "document:a#viewer@user:alice", "document:b#viewer@user:alice", "document:c#viewer@user:alice")

	rev, n, more, err := h.s.DeleteByFilter(h.ctx, nil, viewers, 2, true)
	if err != nil || n != 2 || !more {
		h.t.Fatalf("partial delete: deleted %d, more %v, err %v; want 2, true, nil", n, more, err)
	}
	h.expect(rev, viewers, "document:c#viewer@user:alice")
	h.expect(base, viewers, "document:a#viewer@user:alice", "document:b#viewer@user:alice", "document:c#viewer@user:alice")

	rev, n, more, err = h.s.DeleteByFilter(h.ctx, nil, viewers, 1, false)
	if err != nil || n != 1 || more {
		h.t.Fatalf("delete of exactly the limit: deleted %d, more %v, err %v; want 1, false, nil", n, more, err)
	}
	h.expect(rev, viewers)

	ok := []store.Precondition{{Op: store.MustMatch, Filter: store.Filter{ResourceType: "folder"}}}
	rev, n, more, err = h.s.DeleteByFilter(h.ctx, ok, store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: []string{"alice"}}}, 0, false)
	if err != nil || n != 2 || more {
		h.t.Fatalf("unlimited delete: deleted %d, more %v, err %v; want 2, false, nil", n, more, err)
	}
	h.expect(rev, all)

	rev2, n, _, err := h.s.DeleteByFilter(h.ctx, nil, all, 0, false)
	if err != nil || n != 0 || rev2 <= rev {
		h.t.Fatalf("delete matching nothing: revision %d after %d, deleted %d, err %v", rev2, rev, n, err)
	}
}

func testSchema(h *harness) {
	r0 := h.head()
	r1, err := h.s.WriteSchema(h.ctx, "definition user {}", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	r2 := h.create("document:a#viewer@user:alice")
	errNo := errors.New("schema refused")
	var sawRev store.Revision
	_, err = h.s.WriteSchema(h.ctx, "definition refused {}", func(ctx context.Context, r store.Reader) error {
		sawRev = r.Revision()
		return errNo
	})
	if !errors.Is(err, errNo) || sawRev != r2 {
		h.t.Fatalf("refused schema write: %v after reading revision %d; want %v after %d", err, sawRev, errNo, r2)
	}
	r3, err := h.s.WriteSchema(h.ctx, "definition user {}\ndefinition document {}", func(context.Context, store.Reader) error { return nil })
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range []struct {
		rev  store.Revision
		want string
	}{{r0, ""}, {r1, "definition user {}"}, {r2, "definition user {}"}, {r3, "definition user {}\ndefinition document {}"}} {
		got, err := h.reader(c.rev).Schema(h.ctx)
		if err != nil || got != c.want {
			h.t.Fatalf("schema at %d: %q, %v; want %q", c.rev, got, err, c.want)
		}
	}
	h.expect(r3, all, "document:a#viewer@user:alice")
}

// testConcurrency runs writers and readers together. Each writer keeps exactly one
// relationship on its counter resource, replacing it in every write, so any snapshot
// that shows zero or two of them saw a torn write. Run it under the race detector.
func testConcurrency(h *harness) {
	const writers, readers, writes = 4, 4, 60
	for w := range writers {
		h.create(fmt.Sprintf("counter:%d#value@n:0", w))
	}
	errs := make(chan error, writers+readers)
	done := make(chan struct{})
	var wg, rwg sync.WaitGroup
	for w := range writers {
		wg.Go(func() { errs <- bumpCounter(h.ctx, h.s, w, writes) })
	}
	for range readers {
		rwg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := checkCounters(h.ctx, h.s, writers); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rwg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			h.t.Fatal(err)
		}
	}
	if err := checkCounters(h.ctx, h.s, writers); err != nil {
		h.t.Fatal(err)
	}
	for w := range writers {
		h.expect(h.head(), store.Filter{ResourceType: "counter", ResourceIDs: []string{fmt.Sprint(w)}}, fmt.Sprintf("counter:%d#value@n:%d", w, writes))
	}
}

// bumpCounter moves counter w from value 0 to value writes, one write at a time.
func bumpCounter(ctx context.Context, s store.Store, w, writes int) error {
	for i := 1; i <= writes; i++ {
		prev, _ := parseRel(fmt.Sprintf("counter:%d#value@n:%d", w, i-1))
		next, _ := parseRel(fmt.Sprintf("counter:%d#value@n:%d", w, i))
		us := []store.Update{{Op: store.Delete, Relationship: prev}, {Op: store.Create, Relationship: next}}
		if _, err := s.Write(ctx, nil, us, nil); err != nil {
			return err
		}
	}
	return nil
}

// checkCounters reads the head and fails unless every counter has exactly one value.
func checkCounters(ctx context.Context, s store.Store, writers int) error {
	rev, err := s.HeadRevision(ctx)
	if err != nil {
		return err
	}
	r, err := s.Reader(ctx, rev)
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for item, err := range r.Query(ctx, store.Filter{ResourceType: "counter"}, store.QueryOptions{}) {
		if err != nil {
			return err
		}
		counts[item.Relationship.Resource.ID]++
	}
	for w := range writers {
		if c := counts[fmt.Sprint(w)]; c != 1 {
			return fmt.Errorf("at revision %d counter %d has %d values, want 1", rev, w, c)
		}
	}
	return nil
}

func testCancellation(h *harness) {
	var us []store.Update
	for i := range 2000 {
		r, _ := parseRel(fmt.Sprintf("document:d%04d#viewer@user:u", i))
		us = append(us, store.Update{Op: store.Create, Relationship: r})
	}
	rev := h.write(us...)
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	n := 0
	var gotErr error
	for _, err := range h.reader(rev).Query(ctx, all, store.QueryOptions{}) {
		if err != nil {
			gotErr = err
			break
		}
		if n++; n == 10 {
			cancel()
		}
	}
	if !errors.Is(gotErr, context.Canceled) || n >= len(us) {
		h.t.Fatalf("query cancelled after 10 items read %d and ended with %v; want context.Canceled before the end", n, gotErr)
	}
	if _, err := h.s.Write(ctx, nil, updates(store.Create, h.rel("document:x#viewer@user:u")), nil); !errors.Is(err, context.Canceled) {
		h.t.Fatalf("write with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := h.s.Reader(ctx, rev); !errors.Is(err, context.Canceled) {
		h.t.Fatalf("reader with a cancelled context: %v, want context.Canceled", err)
	}
	if h.head() != rev {
		h.t.Fatalf("cancelled write moved the head from %d to %d", rev, h.head())
	}
	// A validator that sees its context cancelled aborts the write.
	vctx, vcancel := context.WithCancel(h.ctx)
	defer vcancel()
	_, err := h.s.Write(vctx, nil, updates(store.Create, h.rel("document:x#viewer@user:u")), func(ctx context.Context, _ store.Reader) error {
		vcancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || h.head() != rev {
		h.t.Fatalf("write whose validator was cancelled: %v, head %d; want context.Canceled, head %d", err, h.head(), rev)
	}
}
