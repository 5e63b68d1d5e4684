package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// get fetches path from the metrics listener, with a bearer token when token is set.
func get(t *testing.T, addr, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsEndpoint: /metrics carries the cache and runtime series; profiles are
// off unless asked for.
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
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if code, _ := get(t, ts.srv.MetricsAddr(), path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s without --pprof: %d, want 404", path, code)
		}
	}
}

// TestPProfNeverServesTheCommandLine: with --pprof, profiles are served but not the
// command line, which may carry the preshared key or a database password.
func TestPProfNeverServesTheCommandLine(t *testing.T) {
	ts := start(t, func(c *Config) { c.MetricsAddr, c.PProf = "127.0.0.1:0", true })
	for path, want := range map[string]string{
		"/debug/pprof/":                  "goroutine",
		"/debug/pprof/goroutine?debug=1": "goroutine profile:",
	} {
		if code, body := get(t, ts.srv.MetricsAddr(), path, ""); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, body lacks %q", path, code, want)
		}
	}
	code, body := get(t, ts.srv.MetricsAddr(), "/debug/pprof/cmdline", "")
	if code != http.StatusNotFound || strings.Contains(body, testKey) {
		t.Errorf("GET /debug/pprof/cmdline: %d %q, want 404 without the key", code, body)
	}
}

// TestMetricsPresharedKey: with a metrics key, /metrics and the profiles need it.
func TestMetricsPresharedKey(t *testing.T) {
	const key = "metrics-key"
	ts := start(t, func(c *Config) { c.MetricsAddr, c.PProf, c.MetricsPresharedKey = "127.0.0.1:0", true, key })
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		for _, c := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {testKey, http.StatusForbidden}, {key, http.StatusOK}} {
			if code, _ := get(t, ts.srv.MetricsAddr(), path, c.token); code != c.want {
				t.Errorf("GET %s with token %q: %d, want %d", path, c.token, code, c.want)
			}
		}
	}
}

func TestMetricsDisabled(t *testing.T) {
	ts := start(t, func(c *Config) { c.MetricsAddr = "-" })
	if addr := ts.srv.MetricsAddr(); addr != "" {
		t.Errorf("metrics listen on %s with --metrics-addr -", addr)
	}
}
