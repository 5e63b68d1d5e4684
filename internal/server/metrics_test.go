package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMetricsEndpoint: /metrics carries the cache and runtime series and /debug/pprof
// serves profiles, on the metrics listener's own mux.
func TestMetricsEndpoint(t *testing.T) {
	ts := start(t, func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
	body := scrape(t, ts.srv.MetricsAddr())
	for _, want := range []string{
		"latch_dispatch_cache_hits_total", "latch_dispatch_cache_misses_total", "latch_dispatch_cache_evictions_total",
		"latch_dispatch_cache_bytes", "go_gc_duration_seconds", "go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for path, want := range map[string]string{
		"/debug/pprof/":                  "goroutine",
		"/debug/pprof/goroutine?debug=1": "goroutine profile:",
	} {
		resp, err := http.Get("http://" + ts.srv.MetricsAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %s, body lacks %q", path, resp.Status, want)
		}
	}
}

func TestMetricsDisabled(t *testing.T) {
	ts := start(t, func(c *Config) { c.MetricsAddr = "-" })
	if addr := ts.srv.MetricsAddr(); addr != "" {
		t.Errorf("metrics listen on %s with --metrics-addr -", addr)
	}
}
