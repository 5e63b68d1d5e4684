package changefeed

import (
	"context"
	"iter"
	"time"

	"github.com/latch-authz/latch/internal/store"
)

// Step is one look at a backend's committed changes after a position.
type Step struct {
	// Changes are the non-empty changes found, in revision order.
	Changes []store.Change
	// Through is the newest revision looked at: every change at or below it is in
	// Changes or was delivered before.
	Through store.Revision
	// More says that revisions after Through are already visible: look again at once.
	More bool
	// Wake is closed when new revisions may have become visible; nil means poll.
	Wake <-chan struct{}
}

// NextFunc reads the changes committed after a position. It fails with
// store.ErrRevisionGone when the changes after that position are no longer retained.
type NextFunc func(ctx context.Context, after store.Revision) (Step, error)

// Watch turns next into a store.Watcher iterator: it yields every change after after,
// then waits for more (on Step.Wake, or every poll when a step has none), yielding a
// checkpoint at the position it has reached whenever nothing was yielded for
// opts.CheckpointInterval. It ends with ctx's error or next's.
func Watch(ctx context.Context, next NextFunc, after store.Revision, opts store.WatchOptions, poll time.Duration) iter.Seq2[store.Change, error] {
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	return func(yield func(store.Change, error) bool) {
		w := &watchLoop{ctx: ctx, next: next, pos: after, opts: opts, poll: poll, lastYield: time.Now()}
		if err := w.run(yield); err != nil {
			yield(store.Change{}, err)
		}
	}
}

// WatchFeed is the Watch of a backend that keeps a Feed and whose next reads it with
// Feed.Step: a watch from a revision the backend cannot read (collected, or not yet
// reached) fails at once with open's error, before any waiting.
func WatchFeed(ctx context.Context, open func(context.Context, store.Revision) (store.Reader, error), next NextFunc, after store.Revision, opts store.WatchOptions) iter.Seq2[store.Change, error] {
	if _, err := open(ctx, after); err != nil {
		return func(yield func(store.Change, error) bool) { yield(store.Change{}, err) }
	}
	return Watch(ctx, next, after, opts, 0)
}

type watchLoop struct {
	ctx       context.Context
	next      NextFunc
	pos       store.Revision
	opts      store.WatchOptions
	poll      time.Duration
	lastYield time.Time
}

// run yields until the consumer stops (nil) or an error ends the watch.
func (w *watchLoop) run(yield func(store.Change, error) bool) error {
	for {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		st, err := w.next(w.ctx, w.pos)
		if err != nil {
			return err
		}
		for _, c := range st.Changes {
			if !yield(c, nil) {
				return nil
			}
			w.lastYield = time.Now()
		}
		w.pos = max(w.pos, st.Through)
		if st.More {
			continue
		}
		if ci := w.opts.CheckpointInterval; ci > 0 && time.Since(w.lastYield) >= ci {
			if !yield(store.Change{Revision: w.pos, Checkpoint: true}, nil) {
				return nil
			}
			w.lastYield = time.Now()
		}
		if err := w.wait(st.Wake); err != nil {
			return err
		}
	}
}

// wait blocks until wake is closed, the poll interval or the next checkpoint is due,
// or ctx ends.
func (w *watchLoop) wait(wake <-chan struct{}) error {
	d := time.Duration(-1)
	if wake == nil {
		d = w.poll
	}
	if ci := w.opts.CheckpointInterval; ci > 0 {
		due := max(ci-time.Since(w.lastYield), time.Millisecond)
		if d < 0 || due < d {
			d = due
		}
	}
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-w.ctx.Done():
		return w.ctx.Err()
	case <-wake:
	case <-timer:
	}
	return nil
}
