package storetest

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// watchTimeout bounds how long a watch test waits for changes it expects.
const watchTimeout = 10 * time.Second

// testWatch checks store.Watcher, for the stores that implement it: a watcher sees
// every change exactly once and in revision order (creates and touches as TOUCH with
// the full relationship, deletes with the version removed, filtered deletes, schema
// writes, no revisions for writes that changed nothing), resumes from a revision with
// exactly the later changes, emits checkpoints when idle, refuses a future revision,
// and a consumer that stops pulling neither blocks writers nor misses changes.
func testWatch(h *harness) {
	w, ok := h.s.(store.Watcher)
	if !ok {
		h.t.Skipf("%T does not implement store.Watcher", h.s)
	}
	start := h.head()
	ctx, cancel := context.WithTimeout(h.ctx, watchTimeout)
	defer cancel()
	live := collect(ctx, w.Watch(ctx, start, store.WatchOptions{}))

	want := writeWatchScript(h)
	got := live.take(h, len(want))
	expectChanges(h, got, want)

	// Resuming from a revision yields exactly the changes after it.
	from := want[2].rev
	resumed := collect(ctx, w.Watch(ctx, from, store.WatchOptions{}))
	expectChanges(h, resumed.take(h, len(want)-3), want[3:])

	// A consumer that stops pulling does not block writers; when it pulls again it
	// gets every change, in order.
	head := h.head()
	next, stop := iter.Pull2(w.Watch(ctx, head, store.WatchOptions{}))
	defer stop()
	first := h.rel("document:stuck#viewer@user:u")
	rev := h.write(store.Update{Op: store.Create, Relationship: first})
	c, err, _ := next()
	if err != nil {
		h.t.Fatalf("watch: %v", err)
	}
	expectChanges(h, []store.Change{c}, []watched{{rev, []string{"TOUCH " + rel.String(first)}}})
	began := time.Now()
	var more []watched
	for i := range 20 {
		r := h.rel(fmt.Sprintf("document:stuck%d#viewer@user:u", i))
		rev := h.write(store.Update{Op: store.Create, Relationship: r})
		more = append(more, watched{rev, []string{"TOUCH " + rel.String(r)}})
	}
	if d := time.Since(began); d > 5*time.Second {
		h.t.Fatalf("20 writes took %v while a watcher was not reading", d)
	}
	var late []store.Change
	for range more {
		c, err, _ := next()
		if err != nil {
			h.t.Fatalf("watch after a pause: %v", err)
		}
		late = append(late, c)
	}
	expectChanges(h, late, more)

	testWatchCheckpointsAndBounds(h, w)
}

// testWatchCheckpointsAndBounds: an idle watch yields checkpoints at the head; a watch
// from a revision past the head fails with ErrRevisionInFuture.
func testWatchCheckpointsAndBounds(h *harness, w store.Watcher) {
	ctx, cancel := context.WithTimeout(h.ctx, watchTimeout)
	defer cancel()
	head := h.head()
	for c, err := range w.Watch(ctx, head, store.WatchOptions{CheckpointInterval: 20 * time.Millisecond}) {
		if err != nil {
			h.t.Fatalf("waiting for a checkpoint: %v", err)
		}
		if !c.Checkpoint || c.Revision != head || len(c.Updates) > 0 {
			h.t.Fatalf("idle watch yielded %+v, want a checkpoint at %d", c, head)
		}
		break
	}
	for _, err := range w.Watch(ctx, head+100, store.WatchOptions{}) {
		h.expectErr(err, store.ErrRevisionInFuture)
		break
	}
}

// watched is one expected revision: its number and its updates as "OP relationship".
type watched struct {
	rev     store.Revision
	updates []string
}

// writeWatchScript makes writes of every kind and returns the changes a watcher must
// see, one per revision that changed something.
func writeWatchScript(h *harness) []watched {
	parse := func(s string) rel.Relationship {
		r, err := rel.Parse(s)
		if err != nil {
			h.t.Fatal(err)
		}
		return r
	}
	a := parse("document:1#viewer@user:a")
	b := parse("document:1#viewer@group:g#member")
	aCaveated := parse(`document:1#viewer@user:a[only_on:{"day":3}]`)
	c := parse("document:2#editor@user:c[expiration:2100-01-02T03:04:05Z]")
	var out []watched
	add := func(rev store.Revision, updates ...string) {
		out = append(out, watched{rev, updates})
	}
	add(h.write(store.Update{Op: store.Create, Relationship: b}, store.Update{Op: store.Create, Relationship: a}),
		"TOUCH "+rel.String(b), "TOUCH "+rel.String(a))
	add(h.write(store.Update{Op: store.Touch, Relationship: aCaveated}, store.Update{Op: store.Touch, Relationship: c}),
		"TOUCH "+rel.String(aCaveated), "TOUCH "+rel.String(c))
	// A delete names only the key; the change carries the version removed.
	add(h.write(store.Update{Op: store.Delete, Relationship: a}), "DELETE "+rel.String(aCaveated))
	// Deleting what does not exist changes nothing: no revision is reported.
	h.write(store.Update{Op: store.Delete, Relationship: parse("document:9#viewer@user:nobody")})
	rev, err := h.s.WriteSchema(h.ctx, "definition user {}", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	add(rev, "SCHEMA")
	rev, n, _, err := h.s.DeleteByFilter(h.ctx, nil, store.Filter{ResourceType: "document"}, 0, false)
	if err != nil || n != 2 {
		h.t.Fatalf("DeleteByFilter: deleted %d, %v; want 2", n, err)
	}
	add(rev, "DELETE "+rel.String(b), "DELETE "+rel.String(c))
	return out
}

// watchStream collects a watch in a goroutine, so a test can wait for changes with a
// timeout.
type watchStream struct {
	ch  chan store.Change
	err chan error
}

func collect(ctx context.Context, seq iter.Seq2[store.Change, error]) *watchStream {
	s := &watchStream{ch: make(chan store.Change, 1024), err: make(chan error, 1)}
	go func() {
		for c, err := range seq {
			if err != nil {
				s.err <- err
				return
			}
			select {
			case s.ch <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// take waits for n changes that are not checkpoints.
func (s *watchStream) take(h *harness, n int) []store.Change {
	h.t.Helper()
	var out []store.Change
	timeout := time.After(watchTimeout)
	for len(out) < n {
		select {
		case c := <-s.ch:
			if !c.Checkpoint {
				out = append(out, c)
			}
		case err := <-s.err:
			h.t.Fatalf("watch failed after %d of %d changes: %v", len(out), n, err)
		case <-timeout:
			h.t.Fatalf("watch delivered %d of %d changes in %v", len(out), n, watchTimeout)
		}
	}
	// Nothing more may follow.
	select {
	case c := <-s.ch:
		if !c.Checkpoint {
			h.t.Fatalf("watch delivered an unexpected change %s", describeChange(c))
		}
	case <-time.After(50 * time.Millisecond):
	}
	return out
}

func describeChange(c store.Change) string {
	var parts []string
	for _, u := range c.Updates {
		parts = append(parts, u.Op.String()+" "+rel.String(u.Relationship))
	}
	if c.SchemaChanged {
		parts = append(parts, "SCHEMA")
	}
	return fmt.Sprintf("@%d [%s]", c.Revision, strings.Join(parts, ", "))
}

// expectChanges fails unless got is want, revision by revision.
func expectChanges(h *harness, got []store.Change, want []watched) {
	h.t.Helper()
	var g, w []string
	for _, c := range got {
		g = append(g, describeChange(c))
	}
	for _, x := range want {
		w = append(w, fmt.Sprintf("@%d [%s]", x.rev, strings.Join(x.updates, ", ")))
	}
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		h.t.Fatalf("watched changes:\n got  %s\n want %s", strings.Join(g, "\n      "), strings.Join(w, "\n      "))
	}
}
