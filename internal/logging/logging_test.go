package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// buffer is a bytes.Buffer safe for the limiter's timers to write to.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// records decodes the JSON lines in b.
func records(t *testing.T, b *buffer) []map[string]any {
	t.Helper()
	b.mu.Lock()
	text := b.b.String()
	b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRepeatedWarningsAreCounted: 1,722 identical warnings (an outage's failed
// requests) are one line and one count, while other messages and info lines pass.
func TestRepeatedWarningsAreCounted(t *testing.T) {
	var b buffer
	h := Limited(slog.NewJSONHandler(&b, nil), time.Hour) // the window never ends here: Flush ends it
	l := slog.New(h).With("node", "n1")
	for i := range 1722 {
		l.Warn("datastore unavailable", "err", "dial tcp: connection refused", "i", i)
		if i%500 == 0 {
			l.Info("served", "i", i)
			l.Error("internal error", "i", i)
		}
	}
	before := records(t, &b)
	h.Flush()
	after := records(t, &b)[len(before):]

	count := map[string]int{}
	for _, r := range before {
		count[r["level"].(string)+" "+r["msg"].(string)]++
	}
	want := map[string]int{"WARN datastore unavailable": 1, "INFO served": 4, "ERROR internal error": 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d lines %q before the flush, want %d (all: %v)", count[k], k, n, count)
		}
	}
	if len(before) != 6 {
		t.Errorf("%d lines before the flush, want 6: %v", len(before), count)
	}
	got := map[string]map[string]any{}
	for _, r := range after {
		got[r["msg"].(string)] = r
	}
	w := got["datastore unavailable (and 1721 more like it in the last 1h0m0s)"]
	if w == nil || w["repeated"] != float64(1721) || w["i"] != float64(1721) || w["node"] != "n1" || w["level"] != "WARN" {
		t.Errorf("flushed %v; want the warning's count, 1721, with the last one's attributes", after)
	}
	if e := got["internal error (and 3 more like it in the last 1h0m0s)"]; e == nil || e["level"] != "ERROR" {
		t.Errorf("flushed %v; want the error's count, 3", after)
	}
	if len(after) != 2 {
		t.Errorf("%d lines flushed, want 2", len(after))
	}
	// After the flush the next one is written again.
	l.Warn("datastore unavailable")
	if n := len(records(t, &b)); n != len(before)+len(after)+1 {
		t.Errorf("a warning after the flush was not written")
	}
	h.Flush()
}

// TestWindowEndWritesTheCount: when the window ends, its count is written by itself
// (no further record is needed), and a message that stopped repeating is forgotten.
func TestWindowEndWritesTheCount(t *testing.T) {
	var b buffer
	h := Limited(slog.NewJSONHandler(&b, nil), 20*time.Millisecond)
	defer h.Flush()
	l := slog.New(h)
	l.Warn("peer unreachable")
	l.Warn("peer unreachable")
	l.Warn("peer unreachable")
	deadline := time.Now().Add(time.Minute) // bounds a broken timer only
	for {
		h.s.mu.Lock()
		open := len(h.s.runs)
		h.s.mu.Unlock()
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the window never ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	rs := records(t, &b)
	if len(rs) != 2 || rs[1]["msg"] != "peer unreachable (and 2 more like it in the last 20ms)" {
		t.Errorf("got %v; want the warning and then its count", rs)
	}
}

// TestStdLoggerWritesRecords: net/http's error lines, a TLS handshake error among
// them, become records of the configured handler.
func TestStdLoggerWritesRecords(t *testing.T) {
	var b buffer
	l := StdLogger(slog.New(slog.NewJSONHandler(&b, nil)))
	l.Printf("http: TLS handshake error from 127.0.0.1:53412: tls: first record does not look like a TLS handshake")
	l.Printf("http: Accept error: too many open files; retrying in 5ms")
	rs := records(t, &b)
	if len(rs) != 2 {
		t.Fatalf("got %v", rs)
	}
	if r := rs[0]; r["msg"] != "http: TLS handshake error" || r["remote"] != "127.0.0.1:53412" || r["err"] != "tls: first record does not look like a TLS handshake" || r["level"] != "WARN" {
		t.Errorf("TLS handshake line became %v", r)
	}
	if r := rs[1]; r["msg"] != "http: Accept error: too many open files; retrying in 5ms" {
		t.Errorf("other line became %v", r)
	}
}
