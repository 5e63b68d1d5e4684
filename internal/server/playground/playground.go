// Package playground serves latch's playground: a page under /playground where a
// person writes a schema (SpiceDB's or Permify's language), relationships, checks and
// a validation file's assertions, and sees diagnostics, answers and check trees at
// once. The page is embedded in the binary and needs no network; its JSON API under
// /playground/api/ runs everything on a scratch memory store and engine per browser
// session, never on the server's data. The package only translates between that API
// and the schema compiler, the engine and the validation-file runner.
package playground

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"
)

//go:embed static
var static embed.FS

// Defaults of Config.
const (
	DefaultMaxSessions      = 32
	DefaultIdleTimeout      = 30 * time.Minute
	DefaultMaxRelationships = 5000
	DefaultMaxChecks        = 200
	DefaultTimeout          = 5 * time.Second
)

// Config bounds what the playground may hold: it is open to anyone who reaches the
// HTTP listener, so every session and what it holds is limited.
type Config struct {
	// MaxSessions is how many browser sessions keep a scratch store at once; past it
	// the least recently used one is dropped (it is rebuilt from the page's text on
	// its next request).
	MaxSessions int
	// IdleTimeout drops a session not used for this long.
	IdleTimeout time.Duration
	// MaxRelationships bounds the relationship lines of one session.
	MaxRelationships int
	// MaxChecks bounds the checks of one request.
	MaxChecks int
	// Timeout bounds one request's evaluation; one that runs out answers 503. How many
	// evaluate at once is the server's to bound (its admission control), so that the
	// playground cannot take the CPU from the server's own API.
	Timeout time.Duration
	// Key, when set, is the bearer token every API request must present.
	Key string
	// MaxDepth is the engine's depth limit; 0 means the engine's default.
	MaxDepth int
	// Now is the clock, for tests; default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxRelationships <= 0 {
		c.MaxRelationships = DefaultMaxRelationships
	}
	if c.MaxChecks <= 0 {
		c.MaxChecks = DefaultMaxChecks
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Handler serves the page and its API; mount it at /playground/.
type Handler struct {
	cfg    Config
	mux    *http.ServeMux
	mu     sync.Mutex
	active map[string]*session // guarded by mu
}

// New returns a Handler.
func New(cfg Config) *Handler {
	cfg = cfg.withDefaults()
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), active: map[string]*session{}}
	assets, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded folder is part of the binary
	}
	files := http.FileServerFS(assets)
	h.mux.HandleFunc("GET /playground", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/playground/", http.StatusMovedPermanently)
	})
	h.mux.Handle("GET /playground/", noStore(http.StripPrefix("/playground", files)))
	h.mux.HandleFunc("POST /playground/api/analyze", h.api(h.analyze))
	h.mux.HandleFunc("POST /playground/api/check", h.api(h.check))
	h.mux.HandleFunc("POST /playground/api/validate", h.api(h.validate))
	h.mux.HandleFunc("POST /playground/api/export", h.api(h.export))
	h.mux.HandleFunc("POST /playground/api/import", h.api(h.importFile))
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// noStore keeps browsers from serving an old page after latch is upgraded, and
// sets the page's security headers.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// The page loads nothing but its own files and talks only to its own API.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}

// requestError is a problem with a request itself, answered with 400 and its message.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

// api decodes a JSON request into a workspace-carrying body, runs fn, and encodes
// its answer; request problems are 400s, a missing key 401, an evaluation past the
// time limit 503 saying so, anything else a 500 without detail.
func (h *Handler) api(fn func(r *http.Request, req *request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !h.authorized(r) {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "this playground needs its key: send it as `Authorization: Bearer <key>`"})
			return
		}
		var req request
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		out, err := any(nil), dec.Decode(&req)
		if err != nil {
			err = &requestError{"reading the request: " + err.Error()}
		} else {
			out, err = fn(r, &req)
		}
		status, msg := h.errorStatus(err)
		if status != http.StatusOK {
			w.WriteHeader(status)
			out = map[string]string{"error": msg}
		}
		_ = json.NewEncoder(w).Encode(out)
	}
}

// errorStatus is the HTTP status and message an API call that failed with err
// answers (200 for nil).
func (h *Handler) errorStatus(err error) (int, string) {
	var re *requestError
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.As(err, &re):
		return http.StatusBadRequest, re.msg
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, fmt.Sprintf("the evaluation took longer than the playground's limit of %s and was stopped; make the input smaller or try again", h.cfg.Timeout)
	}
	return http.StatusInternalServerError, "internal error"
}

// authorized says whether r presents the playground's key, when it has one.
func (h *Handler) authorized(r *http.Request) bool {
	if h.cfg.Key == "" {
		return true
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(token), []byte(h.cfg.Key)) == 1
}

// session returns the scratch session id names, creating it (and dropping idle and,
// when full, least recently used ones) as needed.
func (h *Handler) session(id string) (*session, error) {
	if !validSessionID(id) {
		return nil, &requestError{"missing or malformed session id: expected 16 to 64 letters, digits or dashes"}
	}
	now := h.cfg.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, s := range h.active {
		if now.Sub(s.lastUsed) > h.cfg.IdleTimeout {
			delete(h.active, k)
			s.close()
		}
	}
	s, ok := h.active[id]
	if !ok {
		if len(h.active) >= h.cfg.MaxSessions {
			h.evictOldestLocked()
		}
		s = newSession(h.cfg)
		h.active[id] = s
	}
	s.lastUsed = now
	return s, nil
}

func (h *Handler) evictOldestLocked() {
	var oldest string
	for k, s := range h.active {
		if oldest == "" || s.lastUsed.Before(h.active[oldest].lastUsed) {
			oldest = k
		}
	}
	h.active[oldest].close()
	delete(h.active, oldest)
}

// Close drops every session.
func (h *Handler) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, s := range h.active {
		s.close()
		delete(h.active, k)
	}
}

func validSessionID(id string) bool {
	if len(id) < 16 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
