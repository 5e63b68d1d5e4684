package cluster

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/latch-authz/latch/internal/engine"
)

const (
	// downAfter consecutive failed (or hedged-around) dispatches mark a peer down.
	downAfter = 3
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
	lat  latencies

	mu       sync.Mutex
	fails    int
	down     bool
	probeAt  time.Time
	backoff  time.Duration
	probing  bool
	upMetric prometheus.Gauge
	sent     prometheus.Counter
	failed   prometheus.Counter
}

func newPeer(c *Cluster, addr string, conn *grpc.ClientConn) *peer {
	p := &peer{c: c, addr: addr, conn: conn, sem: make(chan struct{}, c.cfg.ConcurrencyLimit)}
	p.upMetric = c.metrics.peerUp.WithLabelValues(addr)
	p.upMetric.Set(1)
	p.sent = c.metrics.sent.WithLabelValues(addr)
	p.failed = c.metrics.failed.WithLabelValues(addr)
	return p
}

func (p *peer) close() {
	p.conn.Close()
	p.c.metrics.forget(p.addr)
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
	p.fails, p.probing, p.backoff = 0, false, 0
	if p.down {
		p.down = false
		p.upMetric.Set(1)
		p.c.cfg.Logger.Info("cluster member is up again", "member", p.addr)
	}
}

// failedOnce records a failed or hedged-around dispatch; enough in a row mark the
// peer down, and a failed probe doubles the wait before the next.
func (p *peer) failedOnce() {
	p.failed.Inc()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fails++
	p.probing = false
	if p.fails < downAfter {
		return
	}
	if p.down {
		p.backoff = min(2*p.backoff, probeMax)
	} else {
		p.down, p.backoff = true, probeFirst
		p.upMetric.Set(0)
		p.c.cfg.Logger.Warn("cluster member marked down; its subproblems are answered locally", "member", p.addr, "failures", p.fails)
	}
	p.probeAt = time.Now().Add(p.backoff)
}

// Dispatch is engine.Node's. The peer answers unless it is busy (its dispatches in
// flight are at the limit) or fails, when local does; if the peer has not answered
// after the hedging delay, local starts too and the first answer wins.
func (p *peer) Dispatch(ctx context.Context, sp *engine.Subproblem, local func(context.Context) (*engine.Answers, error)) (*engine.Answers, error) {
	select {
	case p.sem <- struct{}{}:
	default:
		p.c.metrics.busy.Inc()
		return local(ctx)
	}
	defer func() { <-p.sem }()
	p.sent.Inc()

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		a   *engine.Answers
		err error
	}
	hedged := make(chan answer, 1)
	start := time.Now()
	timer := time.AfterFunc(p.c.hedge.get(), func() {
		p.c.metrics.hedges.Inc()
		a, err := local(rctx)
		if err == nil {
			cancel() // the local answer wins: stop waiting for the peer
		}
		hedged <- answer{a, err}
	})
	a, err := p.call(rctx, sp)
	if timer.Stop() {
		// No hedge was started: the peer's answer (or failure) decides.
		if err == nil {
			p.lat.add(time.Since(start), &p.c.hedge)
			p.succeeded()
			return a, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.failedOnce()
		p.c.metrics.fallbacks.Inc()
		return local(ctx)
	}
	if err == nil {
		cancel() // the peer won: the local hedge stops
		p.lat.add(time.Since(start), &p.c.hedge)
		p.succeeded()
		return a, nil
	}
	h := <-hedged
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	p.failedOnce() // slow or failed: a strike either way
	if h.err == nil {
		p.c.metrics.hedgesWon.Inc()
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

// latencies keeps a peer's recent dispatch latencies and their 95th percentile.
type latencies struct {
	mu   sync.Mutex
	ring [256]time.Duration
	n    int
	p95  atomic.Int64 // 0 until enough samples
}

// add records d, recomputing the percentile every 32 samples (and the cluster's
// hedging delay with it).
func (l *latencies) add(d time.Duration, h *hedgeDelay) {
	l.mu.Lock()
	l.ring[l.n%len(l.ring)] = d
	l.n++
	if l.n%32 != 0 {
		l.mu.Unlock()
		return
	}
	s := slices.Clone(l.ring[:min(l.n, len(l.ring))])
	l.mu.Unlock()
	slices.Sort(s)
	l.p95.Store(int64(s[len(s)*95/100]))
	h.update(time.Duration(l.p95.Load()))
}

// hedgeDelay is how long a dispatch may take before a local answer is started: the
// lowest p95 among the peers (so a slow peer's latency does not set the bar for it),
// never under hedgeMin. It is shared by all peers and decays toward new samples.
type hedgeDelay struct {
	d atomic.Int64
}

const (
	hedgeInitial = 20 * time.Millisecond // before any peer has a percentile
	hedgeMin     = time.Millisecond
	hedgeMax     = time.Second
)

func (h *hedgeDelay) init() { h.d.Store(int64(hedgeInitial)) }

func (h *hedgeDelay) get() time.Duration { return time.Duration(h.d.Load()) }

// update lowers the delay to a peer's new p95 when it is lower, and otherwise moves it
// an eighth of the way up, so one fast peer's percentile holds the bar and a cluster
// that slows as a whole raises it gradually.
func (h *hedgeDelay) update(p95 time.Duration) {
	p95 = min(max(p95, hedgeMin), hedgeMax)
	for {
		cur := h.d.Load()
		next := int64(p95)
		if next > cur {
			next = cur + (next-cur)/8
		}
		if h.d.CompareAndSwap(cur, next) {
			return
		}
	}
}
