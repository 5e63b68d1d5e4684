// Package revision picks the store revision that reads which ask for no particular
// freshness (SpiceDB's minimize_latency) run at: Quantizer cuts time into windows and
// serves one revision per window, so that their subproblems share cache entries and
// the store's head is read once per window rather than once per request.
package revision

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/latch-authz/latch/internal/store"
)

// Quantizer picks the revision minimize_latency reads run at. Time is cut into windows;
// every read in a window uses the revision that was the head when the window was first
// asked for, so their subproblems share cache entries, and the head is fetched once per
// window (singleflight) instead of once per request. Each request moves its clock back
// by a random allowance of up to maxStaleness, so near a window boundary requests move
// to the new revision gradually rather than all at the same instant.
//
// Store revisions are counters, not times, so "the revision of a window" cannot be
// computed from the clock; it is observed. The quantizer keeps a two-entry history of
// (window number, head revision first seen in that window): the current and the
// previous window, which is all smearing needs, since the allowance is at most one
// window. A request whose smeared clock falls in a window the history lacks (the server
// was idle then, or the window was forgotten) reads the newest remembered window's
// revision, which is fresher than that window's would have been; only when the history
// has nothing as new does it fetch the head, once per window.
type Quantizer struct {
	window       time.Duration // <= 0: no quantization, read the head
	maxStaleness time.Duration
	head         func(context.Context) (store.Revision, error)
	now          func() time.Time // time.Now; tests move the clock

	mu    sync.Mutex
	slots [2]windowRev // guarded by mu; newest first
	group singleflight.Group
}

type windowRev struct {
	window int64 // window number: unix ns / window length
	rev    store.Revision
	seen   bool // false: an empty history entry (revision 0 is a valid head)
}

// NewQuantizer returns a quantizer of windows of the given length (<= 0: every read
// reads the head) whose reads may be up to stalenessPercent of a window older than the
// window's start; head reads the store's newest revision.
func NewQuantizer(window time.Duration, stalenessPercent int, head func(context.Context) (store.Revision, error)) *Quantizer {
	q := &Quantizer{window: window, head: head, now: time.Now}
	if stalenessPercent > 0 {
		q.maxStaleness = window * time.Duration(stalenessPercent) / 100
	}
	return q
}

// Revision is the revision a read at the present moment runs at.
func (q *Quantizer) Revision(ctx context.Context) (store.Revision, error) {
	if q.window <= 0 {
		return q.head(ctx)
	}
	now := q.now()
	if q.maxStaleness > 0 {
		now = now.Add(-rand.N(q.maxStaleness))
	}
	w := now.UnixNano() / int64(q.window)
	if rev, ok := q.known(w); ok {
		return rev, nil
	}
	v, err, _ := q.group.Do(strconv.FormatInt(w, 10), func() (any, error) {
		rev, err := q.head(context.WithoutCancel(ctx))
		if err == nil {
			q.remember(w, rev)
		}
		return rev, err
	})
	if err != nil {
		return 0, err
	}
	return v.(store.Revision), nil
}

// known returns the revision remembered for window w, or for the newest remembered
// window when w is older than it.
func (q *Quantizer) known(w int64) (store.Revision, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.slots {
		if s.seen && s.window == w {
			return s.rev, true
		}
	}
	if newest := q.slots[0]; newest.seen && w < newest.window {
		return newest.rev, true
	}
	return 0, false
}

// remember keeps the head seen for window w if w is one of the two newest windows.
func (q *Quantizer) remember(w int64, rev store.Revision) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case !q.slots[0].seen || w > q.slots[0].window:
		q.slots[1], q.slots[0] = q.slots[0], windowRev{w, rev, true}
	case w < q.slots[0].window && (!q.slots[1].seen || w > q.slots[1].window):
		q.slots[1] = windowRev{w, rev, true}
	}
}
