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
	// downAfter consecutive failed dispatches mark a peer down. Only failures do: a
	// peer that loses races to local hedges is slow, not gone, and the hedges already
	// bound what its slowness costs. Marking down for lost races took healthy peers
	// out five to nine times a minute under load, and kept a restarted (cold) peer
	// out for good, since its first answers always lose.
	downAfter = 3
	// A down peer is probed with the dispatch service's Health call (not a dispatch,
	// which a cold peer would lose to the local hedge) after probeFirst, then after
	// twice as long each time the probe fails, up to probeMax: a peer that is back is
	// taken back within probeMax.
	probeFirst   = 250 * time.Millisecond
	probeMax     = 2 * time.Second
	probeTimeout = 2 * time.Second
	// DefaultWarmUp is how long a peer that came back takes to be given its whole
	// share of subproblems: its share grows evenly from a sixty-fourth, so its caches
	// and connections fill before it carries its full load.
	DefaultWarmUp = 5 * time.Second
)

// peer is another member: a connection, a bound on dispatches in flight, its health
// and its recent latencies.
type peer struct {
	c    *Cluster
	addr string
	conn *grpc.ClientConn
	sem  chan struct{}

	mu       sync.Mutex
	fails    int                // guarded by mu; consecutive failed dispatches
	down     bool               // guarded by mu
	upSince  time.Time          // guarded by mu; when the peer came back (zero: warmed up)
	lat      map[*class]*window // guarded by mu
	calls    atomic.Uint64      // subproblems offered while warming up
	stop     chan struct{}      // closed by close: the prober ends
	probes   sync.WaitGroup
	upMetric prometheus.Gauge
	sent     prometheus.Counter
	failed   prometheus.Counter
	downs    prometheus.Counter
	rejoins  prometheus.Counter
}

func newPeer(c *Cluster, addr string, conn *grpc.ClientConn) *peer {
	p := &peer{c: c, addr: addr, conn: conn, sem: make(chan struct{}, c.cfg.ConcurrencyLimit), lat: map[*class]*window{}, stop: make(chan struct{})}
	p.upMetric = c.metrics.peerUp.WithLabelValues(addr)
	p.upMetric.Set(1)
	p.sent = c.metrics.sent.WithLabelValues(addr)
	p.failed = c.metrics.failed.WithLabelValues(addr)
	p.downs = c.metrics.downs.WithLabelValues(addr)
	p.rejoins = c.metrics.rejoined.WithLabelValues(addr)
	return p
}

func (p *peer) close() {
	close(p.stop)
	p.conn.Close()
	p.probes.Wait()
	p.c.metrics.forget(p.addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	for cls := range p.lat {
		cls.set(p, 0)
	}
}

// available reports whether a subproblem may go to p: it is up and, while it warms up
// after coming back, this subproblem falls in the share it is given so far.
func (p *peer) available() bool {
	p.mu.Lock()
	down, since := p.down, p.upSince
	p.mu.Unlock()
	if down {
		return false
	}
	if since.IsZero() {
		return true
	}
	warm := time.Since(since)
	if warm >= p.c.cfg.WarmUp {
		p.mu.Lock()
		if p.upSince.Equal(since) {
			p.upSince = time.Time{}
		}
		p.mu.Unlock()
		return true
	}
	// The share grows from 1/64 to 64/64; mix spreads the offered subproblems over
	// the 64 slots evenly, whatever their order.
	share := 1 + uint64(63*warm/p.c.cfg.WarmUp)
	return mix(p.calls.Add(1))%64 < share
}

// succeeded records an answer.
func (p *peer) succeeded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fails = 0
}

// failedOnce records a failed dispatch: downAfter in a row mark the peer down, and a
// prober then asks its Health until it answers.
func (p *peer) failedOnce() {
	p.failed.Inc()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fails++
	if p.fails < downAfter || p.down {
		return
	}
	p.down = true
	p.upMetric.Set(0)
	p.downs.Inc()
	p.c.cfg.Logger.Warn("cluster member marked down; its subproblems are answered locally", "member", p.addr, "reason", fmt.Sprintf("%d dispatches in a row failed", p.fails))
	select {
	case <-p.stop:
		return // closing: no prober
	default:
	}
	p.probes.Add(1)
	go p.probe()
}

// probe asks a down peer's Health, with a growing wait between tries, until it
// answers (the peer is then up and warms up) or the peer is closed.
func (p *peer) probe() {
	defer p.probes.Done()
	wait := probeFirst
	for {
		t := time.NewTimer(wait)
		select {
		case <-p.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if p.healthy() {
			p.cameBack()
			return
		}
		wait = min(2*wait, probeMax)
	}
}

// healthy asks the peer's dispatch service for its Health once.
func (p *peer) healthy() bool {
	// close closes the connection, which ends a probe in flight.
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	p.conn.Connect()
	var resp frame
	// WaitForReady: a connection that is reconnecting is waited for (up to the
	// timeout), rather than failing the probe at once.
	return p.conn.Invoke(ctx, healthMethod, &frame{}, &resp, grpc.WaitForReady(true)) == nil
}

// cameBack takes a down peer back, at the start of its warm-up.
func (p *peer) cameBack() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.fails, p.upSince = false, 0, time.Now()
	p.upMetric.Set(1)
	p.rejoins.Inc()
	p.c.cfg.Logger.Info("cluster member is up again; warming up", "member", p.addr, "warm_up", p.c.cfg.WarmUp)
}

// Dispatch is engine.Node's. The peer answers unless it is busy (its dispatches in
// flight are at the limit) or fails, when local does; if the peer has not answered
// after the hedging delay of the subproblem's class, local starts too and the first
// answer wins. Failures count against the peer; races lost to the local answer do
// not (see downAfter).
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
