package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ServerMetrics is what the server's Prometheus endpoint said about a phase: the deltas
// of its counters between the phase's start and end.
type ServerMetrics struct {
	// CPUCores is process_cpu_seconds_total's growth per second of the phase.
	CPUCores float64 `json:"cpu_cores"`
	// CacheHitRatio is hits / (hits + misses) over every counter whose name holds
	// "cache" and "hit" or "miss"; -1 when the server exports none.
	CacheHitRatio float64 `json:"cache_hit_ratio"`
	// Error says why the scrape failed, if it did.
	Error string `json:"error,omitempty"`
}

// promSample sums the counters we read.
type promSample struct{ cpu, hits, misses float64 }

// parseProm reads the Prometheus text format and sums the counters ServerMetrics uses.
// Labels are ignored; comments and malformed lines are skipped.
func parseProm(r io.Reader) (promSample, error) {
	var s promSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, v, ok := promLine(line)
		if !ok {
			continue
		}
		switch {
		case name == "process_cpu_seconds_total":
			s.cpu += v
		case strings.Contains(name, "cache") && strings.Contains(name, "hit") && !strings.Contains(name, "ratio"):
			s.hits += v
		case strings.Contains(name, "cache") && strings.Contains(name, "miss"):
			s.misses += v
		}
	}
	return s, sc.Err()
}

// promLine splits `name{labels} value [timestamp]`.
func promLine(line string) (string, float64, bool) {
	name, rest := line, ""
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			return "", 0, false
		}
		rest = rest[end+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || math.IsNaN(v) {
		return "", 0, false
	}
	return name, v, true
}

// scrape is a phase's Prometheus reading in progress.
type scrape struct {
	url    string
	before promSample
	err    error
}

func startScrape(ctx context.Context, url string) *scrape {
	if url == "" {
		return nil
	}
	s := &scrape{url: url}
	s.before, s.err = fetchProm(ctx, url)
	return s
}

func (s *scrape) finish(ctx context.Context, wall float64) *ServerMetrics {
	if s == nil {
		return nil
	}
	if s.err != nil {
		return &ServerMetrics{CacheHitRatio: -1, Error: s.err.Error()}
	}
	after, err := fetchProm(ctx, s.url)
	if err != nil {
		return &ServerMetrics{CacheHitRatio: -1, Error: err.Error()}
	}
	m := &ServerMetrics{CacheHitRatio: -1}
	if wall > 0 {
		m.CPUCores = (after.cpu - s.before.cpu) / wall
	}
	hits, misses := after.hits-s.before.hits, after.misses-s.before.misses
	if hits+misses > 0 {
		m.CacheHitRatio = hits / (hits + misses)
	}
	return m
}

func fetchProm(ctx context.Context, url string) (promSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return promSample{}, fmt.Errorf("metrics url %q: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return promSample{}, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return promSample{}, fmt.Errorf("scraping %s: HTTP %s", url, resp.Status)
	}
	return parseProm(resp.Body)
}
