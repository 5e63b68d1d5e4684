package changefeed

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/latch-authz/latch/internal/store"
)

// Hub shares one watch of a store among every watcher of it: a single upstream watch
// (one poller of a SQL database, one changefeed connection of CockroachDB, however
// many watchers) appends what it yields to a bounded in-memory log, and each watcher
// reads the log at its own pace, in its own goroutine. The upstream runs while
// anyone watches. A watcher that starts before the upstream's start reads the store
// directly until it has caught up, then joins the log. A watcher that falls so far
// behind that the log dropped changes it has not read ends with
// store.ErrWatchLagging (resume from the last revision received): it never blocks
// the others, and never skips a change silently. Hub is a store.Watcher.
type Hub struct {
	src  store.Watcher
	head func(context.Context) (store.Revision, error)
	// checkpoint is the upstream's checkpoint interval, which moves every watcher's
	// position forward while nothing changes.
	checkpoint time.Duration
	maxEntries int

	mu   sync.Mutex
	subs int         // guarded by mu; watchers reading
	gen  *generation // guarded by mu; the running upstream, nil when none runs
}

// generation is one run of the upstream watch and its log.
type generation struct {
	start  store.Revision // the upstream yields what was committed after start
	cancel context.CancelFunc

	// All guarded by Hub.mu.
	log     []store.Change // what the upstream yielded, oldest first
	updates int            // the relationship updates log holds
	base    int            // the sequence number of log[0]
	dropped store.Revision // the newest revision dropped from the log (start when none)
	err     error          // why the upstream ended; nil while it runs
	wake    chan struct{}  // closed and replaced on each append or end
}

// DefaultHubEntries bounds a Hub's log, as DefaultMaxUpdates bounds the updates it
// holds (the newest entry stays, however large): a watcher further behind than the
// log ends with store.ErrWatchLagging.
const DefaultHubEntries = 4096

// catchUpCheckpoint is how often a watcher still reading the store directly learns
// its position while nothing changes, which is when it can join the log.
const catchUpCheckpoint = 100 * time.Millisecond

// NewHub shares src among its watchers; head is the store's newest revision, where the
// upstream starts. maxEntries bounds the log (<= 0: DefaultHubEntries).
func NewHub(src store.Watcher, head func(context.Context) (store.Revision, error), checkpoint time.Duration, maxEntries int) *Hub {
	if maxEntries <= 0 {
		maxEntries = DefaultHubEntries
	}
	return &Hub{src: src, head: head, checkpoint: checkpoint, maxEntries: maxEntries}
}

// Watch implements store.Watcher: opts' checkpoints are the upstream's (every
// interval at most when nothing changes), and yielded only when asked for.
func (h *Hub) Watch(ctx context.Context, after store.Revision, opts store.WatchOptions) iter.Seq2[store.Change, error] {
	return func(yield func(store.Change, error) bool) {
		g, err := h.subscribe(ctx)
		if err != nil {
			yield(store.Change{}, err)
			return
		}
		defer h.unsubscribe()
		if after > g.start { // past the upstream's start: the store knows whether it exists
			head, err := h.head(ctx)
			if err == nil && after > head {
				err = store.ErrRevisionInFuture
			}
			if err != nil {
				yield(store.Change{}, err)
				return
			}
		}
		w := &hubWatcher{h: h, g: g, pos: after, checkpoints: opts.CheckpointInterval > 0}
		if err := w.run(ctx, yield); err != nil {
			yield(store.Change{}, err)
		}
	}
}

// subscribe counts a watcher and returns the running upstream, starting one if none
// runs (or the last one failed).
func (h *Hub) subscribe(ctx context.Context) (*generation, error) {
	if g := h.join(); g != nil {
		return g, nil
	}
	// The head is read without the lock: the upstream appends under it, and the
	// database may be slow to answer.
	start, err := h.head(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen == nil || h.gen.err != nil { // else another watcher started one meanwhile
		if h.gen != nil {
			h.gen.cancel()
		}
		upCtx, cancel := context.WithCancel(context.Background())
		h.gen = &generation{start: start, cancel: cancel, dropped: start, wake: make(chan struct{})}
		go h.upstream(upCtx, h.gen)
	}
	h.subs++
	return h.gen, nil
}

// join counts a watcher of the running upstream; nil when none runs.
func (h *Hub) join() *generation {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen == nil || h.gen.err != nil {
		return nil
	}
	h.subs++
	return h.gen
}

func (h *Hub) unsubscribe() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs--
	if h.subs == 0 && h.gen != nil {
		h.gen.cancel()
		h.gen = nil
	}
}

// upstream appends what the store's watch yields to g's log until it ends.
func (h *Hub) upstream(ctx context.Context, g *generation) {
	var end error
	for c, err := range h.src.Watch(ctx, g.start, store.WatchOptions{CheckpointInterval: h.checkpoint}) {
		if err != nil {
			end = err
			break
		}
		h.mu.Lock()
		g.log = append(g.log, c)
		g.updates += len(c.Updates)
		for len(g.log) > 1 && (len(g.log) > h.maxEntries || g.updates > DefaultMaxUpdates) {
			g.dropped = g.log[0].Revision
			g.updates -= len(g.log[0].Updates)
			g.log[0] = store.Change{}
			g.log = g.log[1:]
			g.base++
		}
		g.notifyLocked()
		h.mu.Unlock()
	}
	if end == nil {
		end = ctx.Err()
	}
	h.mu.Lock()
	g.err = end
	g.notifyLocked()
	h.mu.Unlock()
}

func (g *generation) notifyLocked() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// hubWatcher is one watcher's reading of the hub.
type hubWatcher struct {
	h           *Hub
	g           *generation
	pos         store.Revision // every change at or below pos was yielded
	next        int            // the sequence number of the next log entry to read
	checkpoints bool
}

func (w *hubWatcher) run(ctx context.Context, yield func(store.Change, error) bool) error {
	if !w.joinable() {
		stop, err := w.catchUp(ctx, yield)
		if stop || err != nil {
			return err
		}
	}
	w.h.mu.Lock()
	w.next = w.g.base
	w.h.mu.Unlock()
	for {
		batch, wake, err := w.read()
		if err != nil {
			return err
		}
		for _, c := range batch {
			if c.Checkpoint && (!w.checkpoints || c.Revision < w.pos) || !c.Checkpoint && c.Revision <= w.pos {
				continue // delivered already, or not asked for
			}
			if !yield(c, nil) {
				return nil
			}
			w.pos = c.Revision
		}
		if wake == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// joinable says whether the log holds every change after the watcher's position.
func (w *hubWatcher) joinable() bool {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.pos >= w.g.dropped
}

// read returns the log entries the watcher has not read, or, when there are none, the
// channel to wait on; it fails when the log dropped entries before the watcher read
// them, or the upstream ended.
func (w *hubWatcher) read() ([]store.Change, <-chan struct{}, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	g := w.g
	if w.next < g.base {
		return nil, nil, store.ErrWatchLagging
	}
	if i := w.next - g.base; i < len(g.log) {
		batch := append([]store.Change(nil), g.log[i:]...)
		w.next += len(batch)
		return batch, nil, nil
	}
	if g.err != nil {
		return nil, nil, g.err
	}
	return nil, g.wake, nil
}

// catchUp reads the store directly from the watcher's position until the log can take
// over; stop says that the consumer stopped.
func (w *hubWatcher) catchUp(ctx context.Context, yield func(store.Change, error) bool) (stop bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for c, err := range w.h.src.Watch(ctx, w.pos, store.WatchOptions{CheckpointInterval: catchUpCheckpoint}) {
		if err != nil {
			return true, err
		}
		if !c.Checkpoint || w.checkpoints {
			if !yield(c, nil) {
				return true, nil
			}
		}
		w.pos = c.Revision
		if w.joinable() {
			return false, nil
		}
	}
	return true, ctx.Err()
}

var _ store.Watcher = (*Hub)(nil)
