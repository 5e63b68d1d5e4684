package bench

import (
	"errors"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Latencies are recorded in microseconds from 1 µs to a minute; slower answers count
// as a minute.
const (
	maxLatencyMicros = 60_000_000
	codeItemError    = 17 // a check-bulk call that succeeded with a failed item
	numCodes         = 18
)

func newHistogram(digits int) *hdr.Histogram { return hdr.New(1, maxLatencyMicros, digits) }

// shard is one slice of the recorder. Workers are spread over a few shards so that
// recording rarely waits: the lock is contended only by workers of the same shard and
// by the collector once per interval.
type shard struct {
	mu    sync.Mutex
	total []*hdr.Histogram // per step, guarded by mu
	ivl   []*hdr.Histogram // per step, this interval's successes, guarded by mu
	codes [][numCodes]int64
	ivlOK []int64
	ivlKO []int64
}

// recorder collects a phase's answers: whole-phase histograms per step and, per
// interval, a point of the time series.
type recorder struct {
	steps  []string
	shards []*shard
	start  time.Time
	last   time.Time
	agg    []*hdr.Histogram // per step; only the collector touches them
	series []Point          // only the collector touches it
}

func newRecorder(steps []string, shards int) *recorder {
	r := &recorder{steps: steps, start: time.Now()}
	r.last = r.start
	for range shards {
		s := &shard{codes: make([][numCodes]int64, len(steps)), ivlOK: make([]int64, len(steps)), ivlKO: make([]int64, len(steps))}
		for range steps {
			s.total = append(s.total, newHistogram(3))
			s.ivl = append(s.ivl, newHistogram(2))
		}
		r.shards = append(r.shards, s)
	}
	for range steps {
		r.agg = append(r.agg, newHistogram(2))
	}
	return r
}

func errorCode(err error) int {
	if errors.Is(err, errPairFailed) {
		return codeItemError
	}
	return int(status.Code(err))
}

// codeName names an error index as gRPC does (Unavailable, DeadlineExceeded, ...).
func codeName(c int) string {
	if c == codeItemError {
		return "CheckBulkItemError"
	}
	return codes.Code(c).String()
}

// begin starts the phase's clock; the recorder was built before its workers were.
func (r *recorder) begin(now time.Time) { r.start, r.last = now, now }

// record counts one answer of step from a worker of shard i.
func (r *recorder) record(i, step int, d time.Duration, err error) {
	s := r.shards[i%len(r.shards)]
	us := min(max(d.Microseconds(), 1), maxLatencyMicros)
	s.mu.Lock()
	if err != nil {
		s.codes[step][errorCode(err)]++
		s.ivlKO[step]++
	} else {
		s.codes[step][0]++
		_ = s.total[step].RecordValue(us)
		_ = s.ivl[step].RecordValue(us)
		s.ivlOK[step]++
	}
	s.mu.Unlock()
}

// Point is one interval of the time series. Latencies are milliseconds.
type Point struct {
	// T is the end of the interval in seconds since the phase began.
	T      float64            `json:"t"`
	Rate   float64            `json:"rate"`
	Errors int64              `json:"errors"`
	P50    float64            `json:"p50_ms"`
	P90    float64            `json:"p90_ms"`
	P99    float64            `json:"p99_ms"`
	Steps  map[string]float64 `json:"step_rates"`
}

// flush closes the current interval at now and appends its point.
func (r *recorder) flush(now time.Time) Point {
	ok, ko := make([]int64, len(r.steps)), make([]int64, len(r.steps))
	for _, h := range r.agg {
		h.Reset()
	}
	for _, s := range r.shards {
		s.mu.Lock()
		for i := range r.steps {
			r.agg[i].Merge(s.ivl[i])
			s.ivl[i].Reset()
			ok[i] += s.ivlOK[i]
			ko[i] += s.ivlKO[i]
			s.ivlOK[i], s.ivlKO[i] = 0, 0
		}
		s.mu.Unlock()
	}
	secs := max(now.Sub(r.last).Seconds(), 1e-9)
	r.last = now
	all := newHistogram(2)
	p := Point{T: now.Sub(r.start).Seconds(), Steps: map[string]float64{}}
	for i, name := range r.steps {
		all.Merge(r.agg[i])
		p.Steps[name] = float64(ok[i]) / secs
		p.Rate += float64(ok[i]) / secs
		p.Errors += ko[i]
	}
	p.P50, p.P90, p.P99 = ms(all.ValueAtQuantile(50)), ms(all.ValueAtQuantile(90)), ms(all.ValueAtQuantile(99))
	r.series = append(r.series, p)
	return p
}

func ms(us int64) float64 { return float64(us) / 1000 }

// totals merges the shards' whole-phase histograms and error counts per step. Call it
// after the workers have stopped.
func (r *recorder) totals() ([]*hdr.Histogram, [][numCodes]int64) {
	hs := make([]*hdr.Histogram, len(r.steps))
	cs := make([][numCodes]int64, len(r.steps))
	for i := range r.steps {
		hs[i] = newHistogram(3)
		for _, s := range r.shards {
			s.mu.Lock()
			hs[i].Merge(s.total[i])
			for c, n := range s.codes[i] {
				cs[i][c] += n
			}
			s.mu.Unlock()
		}
	}
	return hs, cs
}
