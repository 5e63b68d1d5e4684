package server

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/latch-authz/latch/internal/store"
)

// quantizer picks the revision minimize_latency reads run at. Time is cut into windows;
// every read in a window uses the revision that was the head when the window was first
// asked for, so their subproblems share cache entries, and the head is fetched once per
// window (singleflight) instead of once per request. Each request moves its clock back
// by a random allowance of up to maxStaleness, so near a window boundary requests move
// to the new revision gradually rather than all at the same instant.
//
// Store revisions are counters, not times, so the quantizer remembers the head it saw
// for the current and the previous window; a request whose smeared clock falls in an
// older, forgotten window simply reads the current head.
type quantizer struct {
	window       time.Duration // <= 0: no quantization, read the head
	maxStaleness time.Duration
	head         func(context.Context) (store.Revision, error)

	mu    sync.Mutex
	slots [2]windowRev // guarded by mu; newest first
	group singleflight.Group
}

type windowRev struct {
	window int64 // window number: unix ns / window length
	rev    store.Revision
}

func newQuantizer(window time.Duration, stalenessPercent int, head func(context.Context) (store.Revision, error)) *quantizer {
	return &quantizer{window: window, maxStaleness: window * time.Duration(stalenessPercent) / 100, head: head}
}

func (q *quantizer) revision(ctx context.Context) (store.Revision, error) {
	if q.window <= 0 {
		return q.head(ctx)
	}
	now := time.Now()
	if q.maxStaleness > 0 {
		now = now.Add(-rand.N(q.maxStaleness))
	}
	w := now.UnixNano() / int64(q.window)
	q.mu.Lock()
	for _, s := range q.slots {
		if s.window == w && s.rev != 0 {
			q.mu.Unlock()
			return s.rev, nil
		}
	}
	q.mu.Unlock()
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

// remember keeps the head seen for window w if w is one of the two newest windows.
func (q *quantizer) remember(w int64, rev store.Revision) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case w > q.slots[0].window:
		q.slots[1], q.slots[0] = q.slots[0], windowRev{w, rev}
	case w < q.slots[0].window && w > q.slots[1].window:
		q.slots[1] = windowRev{w, rev}
	}
}
