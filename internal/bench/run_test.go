package bench

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sleeper is a worker whose every request takes d and fails with err.
type sleeper struct {
	d     time.Duration
	err   error
	calls *atomic.Int64
	// inFlight and most track concurrency when not nil.
	inFlight, most *atomic.Int64
}

func (s sleeper) do(ctx context.Context) (int, error) {
	s.calls.Add(1)
	if s.inFlight != nil {
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
		}
	}
	time.Sleep(s.d)
	return 0, s.err
}

func TestOpenModelCountsDroppedIterations(t *testing.T) {
	defer goleak.VerifyNone(t)
	var calls atomic.Int64
	// 400 arrivals/s for 0.5 s = 200 arrivals; 2 workers of 20 ms each can start at
	// most about 50 of them, so about 150 must be dropped, and none may vanish.
	ph := Phase{Name: "open", Duration: 500 * time.Millisecond, Load: LoadModel{Open: true, StartRate: 400, MaxInFlight: 2}}
	pr := &phaseRun{
		p: ph, rec: newRecorder([]string{"s"}, 2), interval: 100 * time.Millisecond,
		newWorker: func(int) worker { return sleeper{d: 20 * time.Millisecond, calls: &calls} },
	}
	pr.run(context.Background())
	started, dropped, scheduled := calls.Load(), pr.dropped.Load(), pr.scheduled.Load()
	if scheduled != 200 {
		t.Errorf("scheduled %d arrivals, want 200 (400/s over 0.5 s)", scheduled)
	}
	if started+dropped != scheduled {
		t.Errorf("started %d + dropped %d != scheduled %d: iterations went missing", started, dropped, scheduled)
	}
	if started > 60 || dropped < 140 {
		t.Errorf("started %d, dropped %d: two 20 ms workers cannot start more than about 50 of 200", started, dropped)
	}
	hs, cs := pr.rec.totals()
	if hs[0].TotalCount() != started || cs[0][0] != started {
		t.Errorf("recorded %d answers, started %d", hs[0].TotalCount(), started)
	}
}

func TestOpenModelWithCapacityDropsNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	var calls atomic.Int64
	ph := Phase{Name: "open", Duration: 300 * time.Millisecond, Load: LoadModel{
		Open: true, StartRate: 100,
		Stages: []Stage{{Target: 300, Duration: 300 * time.Millisecond}}, MaxInFlight: 20,
	}}
	pr := &phaseRun{
		p: ph, rec: newRecorder([]string{"s"}, 2), interval: 100 * time.Millisecond,
		newWorker: func(int) worker { return sleeper{d: time.Millisecond, calls: &calls} },
	}
	pr.run(context.Background())
	// 20 idle workers for 1 ms requests at under one arrival per 3 ms: nothing should
	// drop, but a machine busy with other work may leave a worker unscheduled now and then.
	if pr.scheduled.Load() != 60 || pr.dropped.Load()+calls.Load() != 60 || pr.dropped.Load() > 6 {
		t.Errorf("ramp 100→300/s over 0.3 s: scheduled %d, dropped %d, started %d; want 60, about 0, about 60",
			pr.scheduled.Load(), pr.dropped.Load(), calls.Load())
	}
}

func TestClosedModelKeepsInFlightAndRecordsErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	var calls, inFlight, most atomic.Int64
	ph := Phase{Name: "closed", Duration: 300 * time.Millisecond, Load: LoadModel{InFlight: 4}}
	pr := &phaseRun{
		p: ph, rec: newRecorder([]string{"s"}, 2), interval: 100 * time.Millisecond,
		newWorker: func(int) worker {
			return sleeper{d: 10 * time.Millisecond, err: status.Error(codes.Unavailable, "down"), calls: &calls, inFlight: &inFlight, most: &most}
		},
	}
	pr.run(context.Background())
	// 4 workers × 300 ms / 10 ms is at most about 120 calls (fewer on a busy machine).
	if n := calls.Load(); n < 8 || n > 124 {
		t.Errorf("%d calls, want up to about 120", n)
	}
	if m := most.Load(); m > 4 || m < 2 {
		t.Errorf("at most %d requests were in flight at once, want 4", m)
	}
	res := pr.result(&Workload{Steps: []Step{{Name: "s", Type: StepCheck}}}, CPU{}, nil)
	if res.Steps[0].Errors["Unavailable"] != calls.Load() || res.Steps[0].Count != 0 {
		t.Errorf("errors %v, count %d; want every one of %d calls as Unavailable", res.Steps[0].Errors, res.Steps[0].Count, calls.Load())
	}
	if len(res.Series) < 2 {
		t.Errorf("%d points in the time series of 0.3 s at 0.1 s intervals", len(res.Series))
	}
}

func TestPercentiles(t *testing.T) {
	r := newRecorder([]string{"a"}, 1)
	for i := 1; i <= 1000; i++ {
		r.record(0, 0, time.Duration(i)*time.Millisecond, nil)
	}
	hs, cs := r.totals()
	s := stepResult("a", StepCheck, hs[0], cs[0], 2)
	l := s.Latency
	near := func(got, want float64) bool { return got > want*0.99 && got < want*1.01 }
	if !near(l.P50, 500) || !near(l.P90, 900) || !near(l.P99, 990) || !near(l.P999, 999) || !near(l.Max, 1000) || s.Rate != 500 {
		t.Errorf("latency of 1..1000 ms: %+v, rate %g", l, s.Rate)
	}
	var total int64
	for _, b := range s.Histogram {
		total += b.Count
	}
	if total != 1000 {
		t.Errorf("histogram buckets hold %d values, want 1000", total)
	}
}

func TestParseProm(t *testing.T) {
	text := `# HELP process_cpu_seconds_total Total user and system CPU time.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
latch_cache_hits_total{cache="check"} 300
latch_cache_hits_total{cache="lookup",le="a b"} 100
latch_cache_misses_total{cache="check"} 100
latch_cache_hit_ratio 0.9
garbage line
other_metric 5 1700000000
`
	s, err := parseProm(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if s.cpu != 12.5 || s.hits != 400 || s.misses != 100 {
		t.Errorf("parsed %+v, want cpu 12.5, hits 400, misses 100", s)
	}
}

func TestCompare(t *testing.T) {
	mk := func(rate, p95 float64) *Result {
		st := StepResult{Name: "check", Rate: rate, Latency: Latency{P50: 1, P95: p95, P99: 4, Max: 8}}
		return &Result{Workload: "w", Phases: []PhaseResult{{Name: "steady", Total: st, Steps: []StepResult{st}}}}
	}
	var out bytes.Buffer
	if err := Compare(&out, mk(1000, 2), mk(2000, 1)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2.00x") || !strings.Contains(out.String(), "0.50x") {
		t.Errorf("compare output lacks the 2.00x rate and 0.50x p95 ratios:\n%s", out.String())
	}
	other := &Result{Phases: []PhaseResult{{Name: "other"}}}
	if err := Compare(&out, mk(1, 1), other); err == nil {
		t.Error("compared results with no phase in common")
	}
}

func TestDrawingAllocatesNothing(t *testing.T) {
	w, err := ParseWorkload([]byte(okWorkload))
	if err != nil {
		t.Fatal(err)
	}
	wk := newGRPCWorker(newPlan(w), nil, 1, 0)
	res, sub := wk.drawer(w.Steps[0].Resource), wk.drawer(w.Steps[0].Subject)
	allocs := testing.AllocsPerRun(1000, func() {
		_ = wk.pick()
		_, _ = res.id(), sub.id()
	})
	if allocs != 0 {
		t.Errorf("drawing a step and its ids allocates %g times, want 0", allocs)
	}
}
