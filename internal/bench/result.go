package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// ResultVersion is the JSON result format's version; compare refuses others.
const ResultVersion = 1

// Result is a run's machine-readable outcome: latch bench run -o writes it, compare and
// report read it.
type Result struct {
	Version  int    `json:"version"`
	Workload string `json:"workload"`
	Target   string `json:"target"`
	// Endpoints are the servers' addresses, several when the calls went round-robin
	// over the nodes of a cluster.
	Endpoints  []string      `json:"endpoints,omitempty"`
	Users      int           `json:"users"`
	Started    time.Time     `json:"started"`
	GOMAXPROCS int           `json:"gomaxprocs"`
	Phases     []PhaseResult `json:"phases"`
}

// PhaseResult is one measured phase.
type PhaseResult struct {
	Name      string  `json:"name"`
	Load      string  `json:"load"`
	Duration  float64 `json:"duration_s"`
	Scheduled int64   `json:"scheduled"` // open model: iterations due
	Dropped   int64   `json:"dropped"`   // open model: iterations no worker was free to start
	// Total is every step together.
	Total        StepResult     `json:"total"`
	Steps        []StepResult   `json:"steps"`
	Series       []Point        `json:"series"`
	GeneratorCPU CPU            `json:"generator_cpu"`
	Server       *ServerMetrics `json:"server,omitempty"`
}

// StepResult is one step's answers over a phase. Latencies are milliseconds and count
// successful calls; errors are counted by gRPC code name.
type StepResult struct {
	Name      string           `json:"name"`
	Type      string           `json:"type,omitempty"`
	Count     int64            `json:"count"`
	Rate      float64          `json:"rate"`
	Errors    map[string]int64 `json:"errors"`
	Latency   Latency          `json:"latency_ms"`
	Histogram []Bucket         `json:"histogram"`
}

// Latency is a latency summary in milliseconds.
type Latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Bucket counts latencies up to UpTo milliseconds (above the previous bucket's).
type Bucket struct {
	UpTo  float64 `json:"up_to_ms"`
	Count int64   `json:"count"`
}

func (pr *phaseRun) result(w *Workload, cpu CPU, server *ServerMetrics) PhaseResult {
	hs, cs := pr.rec.totals()
	secs := pr.p.Duration.Seconds()
	if n := len(pr.rec.series); n > 0 {
		secs = max(pr.rec.series[n-1].T, 1e-9)
	}
	out := PhaseResult{
		Name: pr.p.Name, Load: pr.p.Load.String(), Duration: secs, Scheduled: pr.scheduled.Load(),
		Dropped: pr.dropped.Load(), Series: pr.rec.series, GeneratorCPU: cpu, Server: server,
	}
	all := newHistogram(3)
	var allCodes [numCodes]int64
	for i, s := range w.Steps {
		all.Merge(hs[i])
		for c, n := range cs[i] {
			allCodes[c] += n
		}
		out.Steps = append(out.Steps, stepResult(s.Name, s.Type, hs[i], cs[i], secs))
	}
	out.Total = stepResult("total", "", all, allCodes, secs)
	return out
}

func stepResult(name, typ string, h *hdr.Histogram, codes [numCodes]int64, secs float64) StepResult {
	r := StepResult{Name: name, Type: typ, Count: h.TotalCount(), Errors: map[string]int64{}, Histogram: buckets(h)}
	r.Rate = float64(r.Count) / secs
	for c, n := range codes[1:] {
		if n > 0 {
			r.Errors[codeName(c+1)] = n
		}
	}
	if r.Count > 0 {
		r.Latency = Latency{
			Mean: h.Mean() / 1000, P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)),
			P95: ms(h.ValueAtQuantile(95)), P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()),
		}
	}
	return r
}

// buckets folds h into four buckets per doubling, from 10 µs up to its max.
func buckets(h *hdr.Histogram) []Bucket {
	if h.TotalCount() == 0 {
		return nil
	}
	var out []Bucket
	for _, bar := range h.Distribution() {
		if bar.Count == 0 {
			continue
		}
		up := 10.0
		for up < float64(bar.To) {
			up *= math.Pow(2, 0.25)
		}
		upMs := math.Round(up) / 1000
		if n := len(out); n > 0 && out[n-1].UpTo == upMs {
			out[n-1].Count += bar.Count
		} else {
			out = append(out, Bucket{UpTo: upMs, Count: bar.Count})
		}
	}
	return out
}

// WriteJSON writes r indented.
func (r *Result) WriteJSON(w io.Writer) error {
	r.Version = ResultVersion
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadResult reads a JSON result file.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s is not a latch bench result: %w", path, err)
	}
	if r.Version != ResultVersion {
		return nil, fmt.Errorf("%s is result version %d; this latch reads version %d", path, r.Version, ResultVersion)
	}
	return &r, nil
}

// Compare writes, for every phase and step present in both results, B's rate and
// latencies as ratios of A's (B/A: above 1 means B is faster in rate, slower in latency).
func Compare(w io.Writer, a, b *Result) error {
	fmt.Fprintf(w, "A: %s on %s\nB: %s on %s\n", a.Workload, a.Target, b.Workload, b.Target)
	matched := false
	for _, pa := range a.Phases {
		i := slices.IndexFunc(b.Phases, func(p PhaseResult) bool { return p.Name == pa.Name })
		if i < 0 {
			continue
		}
		pb := b.Phases[i]
		fmt.Fprintf(w, "\nphase %s\n%-22s %12s %12s %8s %8s %8s %8s %8s\n", pa.Name, "step", "rate A", "rate B", "rate", "p50", "p95", "p99", "max")
		for _, sa := range append([]StepResult{pa.Total}, pa.Steps...) {
			sb, ok := findStep(pb, sa.Name)
			if !ok {
				continue
			}
			matched = true
			fmt.Fprintf(w, "%-22s %12.1f %12.1f %8s %8s %8s %8s %8s\n", sa.Name, sa.Rate, sb.Rate, ratio(sb.Rate, sa.Rate),
				ratio(sb.Latency.P50, sa.Latency.P50), ratio(sb.Latency.P95, sa.Latency.P95),
				ratio(sb.Latency.P99, sa.Latency.P99), ratio(sb.Latency.Max, sa.Latency.Max))
		}
		if pa.Dropped+pb.Dropped > 0 {
			fmt.Fprintf(w, "%-22s %12d %12d\n", "dropped", pa.Dropped, pb.Dropped)
		}
	}
	if !matched {
		return fmt.Errorf("the results share no phase and step names: nothing to compare")
	}
	fmt.Fprintln(w, "\nratios are B/A")
	return nil
}

func findStep(p PhaseResult, name string) (StepResult, bool) {
	if name == "total" {
		return p.Total, true
	}
	i := slices.IndexFunc(p.Steps, func(s StepResult) bool { return s.Name == name })
	if i < 0 {
		return StepResult{}, false
	}
	return p.Steps[i], true
}

func ratio(b, a float64) string {
	if a == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", b/a)
}
