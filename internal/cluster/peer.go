package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine"
)

const (
	// downAfter consecutive failed dispatches mark a peer down.
	downAfter = 3
	// slowAfter consecutive dispatches that a local hedge answered first mark a peer
	// down too: a peer slower than answering locally, time after time, is one to stop
	// waiting for. A healthy peer loses a race now and then (the hedging delay is twice
	// the fastest peer's p95); it does not lose ten in a row.
	slowAfter = 10
	// A down peer is probed with one real dispatch after probeFirst, and again after
	// twice as long each time the probe fails, up to probeMax.
	probeFirst = 500 * time.Millisecond
	probeMax   = 15 * time.Second
)

// peer is another member: a connection, a bound on dispatches in flight, its health
// and its recent latencies.
type peer struct {
	c    *Cluster
	addr string
	conn *grpc.ClientConn
	sem  chan struct{}

	mu       sync.Mutex
	fails    int // consecutive failed dispatches
	slow     int // consecutive races lost to a local hedge
	down     bool
	probeAt  time.Time
	backoff  time.Duration
	probing  bool
	lat      map[*class]*window // guarded by mu
	upMetric prometheus.Gauge
	sent     prometheus.Counter
	failed   prometheus.Counter
}

func newPeer(c *Cluster, addr string, conn *grpc.ClientConn) *peer {
	p := &peer{c: c, addr: addr, conn: conn, sem: make(chan struct{}, c.cfg.ConcurrencyLimit), lat: map[*class]*window{}}
	p.upMetric = c.metrics.peerUp.WithLabelValues(addr)
	p.upMetric.Set(1)
	p.sent = c.metrics.sent.WithLabelValues(addr)
	p.failed = c.metrics.failed.WithLabelValues(addr)
	return p
}

func (p *peer) close() {
	p.conn.Close()
	p.c.metrics.forget(p.addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	for cls := range p.lat {
		cls.set(p, 0)
	}
}

// available reports whether subproblems may go to p: it is up, or it is down and due
// for a probe, which this caller then is (one at a time).
func (p *peer) available() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down {
		return true
	}
	if p.probing || time.Now().Before(p.probeAt) {
		return false
	}
	p.probing = true
	return true
}

// succeeded records an answer: the peer is up.
func (p *peer) succeeded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fails, p.slow, p.probing, p.backoff = 0, 0, false, 0
	if p.down {
		p.down = false
		p.upMetric.Set(1)
		p.c.cfg.Logger.Info("cluster member is up again", "member", p.addr)
	}
}

// failedOnce records a failed dispatch.
func (p *peer) failedOnce() {
	p.failed.Inc()
	p.strike(&p.fails, downAfter, "failed")
}

// lostRace records a dispatch that a local hedge answered first.
func (p *peer) lostRace() { p.strike(&p.slow, slowAfter, "were slower than answering locally") }

// strike counts one more failure or lost race in *n: threshold in a row mark the peer
// down, and while it is down, each failed probe doubles the wait before the next.
func (p *peer) strike(n *int, threshold int, what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	*n++
	p.probing = false
	if *n < threshold && !p.down {
		return
	}
	if p.down {
		p.backoff = min(2*p.backoff, probeMax)
	} else {
		p.down, p.backoff = true, probeFirst
		p.upMetric.Set(0)
		p.c.cfg.Logger.Warn("cluster member marked down; its subproblems are answered locally", "member", p.addr, "reason", fmt.Sprintf("%d dispatches in a row %s", *n, what))
	}
	p.probeAt = time.Now().Add(p.backoff)
}

// Dispatch is engine.Node's. The peer answers unless it is busy (its dispatches in
// flight are at the limit) or fails, when local does; if the peer has not answered
// after the hedging delay of the subproblem's class, local starts too and the first
// answer wins. Failures count against the peer, and so do races lost to the local
// answer, slowAfter of them in a row: one lost race says little (a subproblem that
// dispatches others is slower than those it dispatches), a run of them that the peer
// is slow.
func (p *peer) Dispatch(ctx context.Context, sp *engine.Subproblem, local func(context.Context) (*engine.Answers, error)) (*engine.Answers, error) {
	select {
	case p.sem <- struct{}{}:
	default:
		p.c.metrics.busy.Inc()
		return local(ctx)
	}
	defer func() { <-p.sem }()
	p.sent.Inc()

	cls := p.c.class(classKey{sp.ResourceType, sp.Relation})
	rctx, cancel := context.WithTimeout(ctx, p.c.cfg.Timeout)
	defer cancel()
	type answer struct {
		a   *engine.Answers
		err error
	}
	hedged := make(chan answer, 1)
	start := time.Now()
	timer := time.AfterFunc(cls.delay(), func() {
		p.c.metrics.hedges.Inc()
		a, err := local(rctx)
		if err == nil {
			cancel() // the local answer wins: stop waiting for the peer
		}
		hedged <- answer{a, err}
	})
	a, err := p.call(rctx, sp)
	if err == nil {
		timer.Stop()
		cancel() // the peer won: a local hedge, if one started, stops
		p.observe(cls, time.Since(start))
		p.succeeded()
		return a, nil
	}
	if timer.Stop() {
		// No hedge was started: answer locally.
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.failedOnce()
		p.c.metrics.fallbacks.Inc()
		return local(ctx)
	}
	h := <-hedged
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if h.err == nil {
		p.c.metrics.hedgesWon.Inc()
		if status.Code(err) != codes.Canceled {
			p.failedOnce() // the peer failed (or timed out) on its own, not because the hedge won
		} else {
			p.lostRace()
		}
	}
	return h.a, h.err
}

func (p *peer) call(ctx context.Context, sp *engine.Subproblem) (*engine.Answers, error) {
	req := encodeSubproblem(sp)
	var resp frame
	if err := p.conn.Invoke(ctx, checkMethod, &req, &resp); err != nil {
		return nil, err
	}
	return decodeAnswers(resp)
}

// observe records how long the peer took to answer a subproblem of class cls.
func (p *peer) observe(cls *class, d time.Duration) {
	p.mu.Lock()
	w := p.lat[cls]
	if w == nil {
		w = &window{}
		p.lat[cls] = w
	}
	p95, ok := w.add(d)
	p.mu.Unlock()
	if ok {
		cls.set(p, p95)
	}
}

// window is the recent latencies of one peer for one class of subproblems.
type window struct {
	ring [64]time.Duration
	n    int
}

// add records d and, every 16 samples, returns the 95th percentile.
func (w *window) add(d time.Duration) (time.Duration, bool) {
	w.ring[w.n%len(w.ring)] = d
	w.n++
	if w.n%16 != 0 {
		return 0, false
	}
	s := slices.Clone(w.ring[:min(w.n, len(w.ring))])
	slices.Sort(s)
	return s[len(s)*95/100], true
}

// classKey names a class of subproblems: those of one relation or permission. They
// cost alike, so one class's latencies say when one of them is slow; a permission
// that dispatches others takes longer than they do, so classes are not mixed.
type classKey struct{ resourceType, relation string }

// class is the hedging delay of a class of subproblems: twice the lowest p95 any peer
// shows for it. The lowest, so that a slow peer does not set the bar it is hedged by;
// twice, so that the ordinary spread of the fastest peer's latencies (a loaded machine,
// a garbage collection) does not start a duplicate evaluation for one dispatch in ten.
type class struct {
	d   atomic.Int64
	mu  sync.Mutex
	p95 map[*peer]time.Duration
}

const (
	hedgeInitial = 20 * time.Millisecond // before any peer has a percentile for the class
	hedgeMin     = time.Millisecond
	hedgeMax     = time.Second
)

func (c *class) delay() time.Duration {
	if d := c.d.Load(); d > 0 {
		return time.Duration(d)
	}
	return hedgeInitial
}

// set records p's new percentile (0: forget p) and recomputes the delay.
func (c *class) set(p *peer, p95 time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p95 == 0 {
		delete(c.p95, p)
	} else {
		c.p95[p] = p95
	}
	lowest := time.Duration(0)
	for _, d := range c.p95 {
		if lowest == 0 || d < lowest {
			lowest = d
		}
	}
	if lowest > 0 {
		lowest = min(max(2*lowest, hedgeMin), hedgeMax)
	}
	c.d.Store(int64(lowest))
}
