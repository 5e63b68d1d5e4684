package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// worker runs one request at a time: it picks a step, runs it and says which it ran.
type worker interface {
	do(ctx context.Context) (step int, err error)
}

// phaseRun is one phase being run.
type phaseRun struct {
	p         Phase
	rec       *recorder
	newWorker func(i int) worker
	interval  time.Duration
	// onPoint is called with each interval's point (progress lines); may be nil.
	onPoint func(Point)
	// scheduled and dropped count the open model's arrivals.
	scheduled, dropped atomic.Int64
	// stop ends the collector, which closes collected when it has.
	stop, collected chan struct{}
}

// run drives the phase to its end (or ctx's), then returns. Every goroutine it starts
// has ended when it returns.
func (pr *phaseRun) run(ctx context.Context) {
	pr.stop, pr.collected = make(chan struct{}), make(chan struct{})
	if pr.p.Load.Open {
		pr.runOpen(ctx)
	} else {
		pr.runClosed(ctx)
	}
	close(pr.stop)
	<-pr.collected
}

// collect closes an interval every pr.interval, and the last one when stop closes.
func (pr *phaseRun) collect() {
	stop := pr.stop
	defer close(pr.collected)
	t := time.NewTicker(pr.interval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			p := pr.rec.flush(now)
			if pr.onPoint != nil {
				pr.onPoint(p)
			}
		case <-stop:
			if now := time.Now(); now.Sub(pr.rec.last) > pr.interval/10 {
				pr.rec.flush(now)
			}
			return
		}
	}
}

// runClosed keeps InFlight requests outstanding until the phase ends. A request that
// has begun finishes and counts; none begins after the end.
func (pr *phaseRun) runClosed(ctx context.Context) {
	workers := make([]worker, pr.p.Load.InFlight)
	for i := range workers {
		workers[i] = pr.newWorker(i)
	}
	pr.startClock()
	end := pr.rec.start.Add(pr.p.Duration)
	var wg sync.WaitGroup
	for i, wk := range workers {
		wg.Go(func() {
			for now := time.Now(); now.Before(end) && ctx.Err() == nil; {
				step, err := wk.do(ctx)
				after := time.Now()
				pr.rec.record(i, step, after.Sub(now), err)
				now = after
			}
		})
	}
	wg.Wait()
}

// runOpen starts iterations at the scheduled arrival rate, whatever the server does.
// An arrival with no idle worker to take it is dropped and counted, as k6's
// arrival-rate executors do: a slow server shows as drops, not as a lower offered rate.
func (pr *phaseRun) runOpen(ctx context.Context) {
	starts := make(chan struct{}) // unbuffered: a send succeeds only into an idle worker
	var wg, ready sync.WaitGroup
	ready.Add(pr.p.Load.MaxInFlight)
	for i := range pr.p.Load.MaxInFlight {
		wk := pr.newWorker(i)
		wg.Go(func() {
			ready.Done()
			for range starts {
				t0 := time.Now()
				step, err := wk.do(ctx)
				pr.rec.record(i, step, time.Since(t0), err)
			}
		})
	}
	// The clock starts once every worker runs, so that start-up is not counted as drops.
	ready.Wait()
	pr.startClock()
	pr.schedule(ctx, starts)
	close(starts)
	wg.Wait()
}

// The open model's scheduler wakes about once per arrival, within these bounds: often
// enough that arrivals go out smoothly rather than in bursts (bursts inflate latency
// and drops), seldom enough that its own wake-ups cost little.
const (
	minSchedulerTick = 100 * time.Microsecond
	maxSchedulerTick = time.Millisecond
)

func (pr *phaseRun) schedule(ctx context.Context, starts chan<- struct{}) {
	m, start, emitted := pr.p.Load, pr.rec.start, int64(0)
	for ctx.Err() == nil {
		el := time.Since(start)
		last := el >= pr.p.Duration
		if last {
			el = pr.p.Duration
		}
		due := int64(m.Arrivals(el))
		for ; emitted < due; emitted++ {
			select {
			case starts <- struct{}{}:
			default:
				pr.dropped.Add(1)
			}
		}
		pr.scheduled.Store(emitted)
		if last {
			return
		}
		tick := maxSchedulerTick
		if r := m.Rate(el); r > 0 {
			tick = min(max(time.Duration(float64(time.Second)/r), minSchedulerTick), maxSchedulerTick)
		}
		time.Sleep(tick)
	}
}

// Options configure Run.
type Options struct {
	// Conns are the connections every worker sends its calls over, each call over the
	// next in turn (at least one); DialEach interleaves several endpoints' connections
	// so that each endpoint gets an equal share of the calls.
	Conns []Conn
	// Endpoints are the addresses Conns reach, recorded in the result.
	Endpoints []string
	// Seed makes the request sequence of each worker reproducible.
	Seed uint64
	// Interval is the time series' resolution (default 1s).
	Interval time.Duration
	// Log receives a progress line per interval; nil for none.
	Log io.Writer
	// Target describes the server in the results.
	Target string
	// MetricsURL is the server's Prometheus endpoint, scraped around each phase; "" for none.
	MetricsURL string
	// Permify, when set, sends the checks to Permify's HTTP API instead of over Conns.
	Permify *PermifyTarget
}

// Run runs every phase of w in order and returns the results of the measured ones.
func Run(ctx context.Context, w *Workload, opt Options) (*Result, error) {
	var httpClient *http.Client
	switch {
	case opt.Permify != nil:
		if err := checkStepsOnly(w); err != nil {
			return nil, err
		}
		httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024}}
		defer httpClient.CloseIdleConnections()
	case len(opt.Conns) == 0:
		return nil, fmt.Errorf("bench run needs a connection to a server")
	}
	if opt.Interval <= 0 {
		opt.Interval = time.Second
	}
	p := newPlan(w)
	res := &Result{Workload: w.Name, Target: opt.Target, Endpoints: opt.Endpoints, Started: time.Now().UTC(), GOMAXPROCS: runtime.GOMAXPROCS(0), Users: w.Users}
	seed := opt.Seed
	for _, ph := range w.Phases {
		newWorker := func(i int) worker { return newGRPCWorker(p, newRotor(opt.Conns, i), seed, i) }
		if opt.Permify != nil {
			newWorker = func(i int) worker { return newPermifyWorker(p, opt.Permify, httpClient, seed, i) }
		}
		seed += 1 << 32 // each phase its own sequences
		pr, cpu, server := runMeasured(ctx, ph, w, newWorker, opt)
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("run stopped during phase %q: %w", ph.Name, err)
		}
		if !ph.Warmup {
			res.Phases = append(res.Phases, pr.result(w, cpu, server))
		}
	}
	return res, nil
}

func runMeasured(ctx context.Context, ph Phase, w *Workload, newWorker func(int) worker, opt Options) (*phaseRun, CPU, *ServerMetrics) {
	names := make([]string, len(w.Steps))
	for i, s := range w.Steps {
		names[i] = s.Name
	}
	workers := ph.Load.InFlight + ph.Load.MaxInFlight
	scrape := startScrape(ctx, opt.MetricsURL)
	before := readCPU()
	pr := &phaseRun{p: ph, rec: newRecorder(names, min(workers, 4*runtime.GOMAXPROCS(0))), newWorker: newWorker, interval: opt.Interval}
	if opt.Log != nil {
		pr.onPoint = func(pt Point) { pr.logPoint(opt.Log, pt) }
		fmt.Fprintf(opt.Log, "phase %s: %s for %s%s\n", ph.Name, ph.Load, ph.Duration, map[bool]string{true: " (warm-up, not measured)"}[ph.Warmup])
	}
	pr.run(ctx)
	cpu := readCPU().since(before)
	return pr, cpu, scrape.finish(ctx, cpu.Wall)
}

func (pr *phaseRun) logPoint(w io.Writer, pt Point) {
	fmt.Fprintf(w, "  %5.1fs  %9.0f req/s  p50 %7.2fms  p90 %7.2fms  p99 %7.2fms  errors %d  dropped %d\n",
		pt.T, pt.Rate, pt.P50, pt.P90, pt.P99, pt.Errors, pr.dropped.Load())
}

// String describes the load model for logs.
func (m LoadModel) String() string {
	if !m.Open {
		return fmt.Sprintf("closed, %d in flight", m.InFlight)
	}
	if len(m.Stages) == 0 {
		return fmt.Sprintf("open, %g/s (at most %d in flight)", m.StartRate, m.MaxInFlight)
	}
	s := fmt.Sprintf("open, from %g/s", m.StartRate)
	for _, st := range m.Stages {
		s += fmt.Sprintf(" → %g/s in %s", st.Target, st.Duration)
	}
	return s + fmt.Sprintf(" (at most %d in flight)", m.MaxInFlight)
}

// startClock starts the phase's clock and its interval collector.
func (pr *phaseRun) startClock() {
	pr.rec.begin(time.Now())
	go pr.collect()
}
