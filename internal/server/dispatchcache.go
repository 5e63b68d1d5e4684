package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-authz/latch/internal/engine/cache"
)

// newDispatchCache returns the engine's cache of subproblem answers with its metrics
// registered, or nil when caching is off.
func newDispatchCache(maxBytes int64, m *metrics) *cache.Cache {
	if maxBytes <= 0 {
		return nil
	}
	c := cache.New(maxBytes)
	stat := func(f func(cache.Stats) float64) func() float64 { return func() float64 { return f(c.Stats()) } }
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "latch", Subsystem: "dispatch_cache", Name: name, Help: help}
	}
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("hits_total", "Subproblems (checks and their parts) answered from the cache.")),
			stat(func(s cache.Stats) float64 { return float64(s.Hits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("misses_total", "Subproblems the cache could not answer.")),
			stat(func(s cache.Stats) float64 { return float64(s.Misses) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("evictions_total", "Answers evicted to make room.")),
			stat(func(s cache.Stats) float64 { return float64(s.Evictions) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("bytes", "Memory the cache holds (fixed at start).")),
			stat(func(s cache.Stats) float64 { return float64(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("hit_ratio", "Share of the subproblems looked up since start that the cache answered.")),
			stat(func(s cache.Stats) float64 {
				if s.Hits+s.Misses == 0 {
					return 0
				}
				return float64(s.Hits) / float64(s.Hits+s.Misses)
			})),
	)
	return c
}
