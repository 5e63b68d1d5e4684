// Package logging owns how the server's log lines are written: repeated warnings and
// errors are held back and counted (an outage must not write one line per failed
// request), and the loggers of net/http and gRPC, which would otherwise write plain
// text of their own, write through the server's slog logger in its format.
package logging

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/grpclog"
)

// DefaultEvery is the window over which repeated records are counted into one line.
const DefaultEvery = 10 * time.Second

// Limited wraps h so that a warning or error repeating one already written in the
// last window (the same level and message) is counted rather than written; when the
// window ends, one record says how many more there were, with the attributes of the
// last: "datastore unavailable (and 1721 more like it in the last 10s)". Records below
// warning pass unchanged. Flush writes the counts of the windows still open (at exit).
func Limited(h slog.Handler, every time.Duration) *Limiter {
	return &Limiter{h: h, s: &limitState{every: every, runs: map[runKey]*run{}}}
}

// Limiter is the slog.Handler Limited returns.
type Limiter struct {
	h slog.Handler
	s *limitState
}

type limitState struct {
	every time.Duration
	mu    sync.Mutex
	runs  map[runKey]*run // guarded by mu; the keys written within their window
}

type runKey struct {
	level slog.Level
	msg   string
}

// run is one key's open window: the records held back in it and the last of them,
// with the handler (attributes, groups) it came through.
type run struct {
	held  int
	last  slog.Record
	h     slog.Handler
	timer *time.Timer
}

func (l *Limiter) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *Limiter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Limiter{h: l.h.WithAttrs(attrs), s: l.s}
}

func (l *Limiter) WithGroup(name string) slog.Handler {
	return &Limiter{h: l.h.WithGroup(name), s: l.s}
}

func (l *Limiter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return l.h.Handle(ctx, r)
	}
	k := runKey{r.Level, r.Message}
	s := l.s
	s.mu.Lock()
	if ru := s.runs[k]; ru != nil {
		ru.held++
		ru.last, ru.h = r.Clone(), l.h
		s.mu.Unlock()
		return nil
	}
	ru := &run{}
	ru.timer = time.AfterFunc(s.every, func() { s.windowEnded(k, ru) })
	s.runs[k] = ru
	s.mu.Unlock()
	return l.h.Handle(ctx, r)
}

// windowEnded writes the count of ru's window; a key that repeated keeps being held
// back for another window, one that did not is forgotten (its next record is written).
func (s *limitState) windowEnded(k runKey, ru *run) {
	s.mu.Lock()
	if s.runs[k] != ru {
		s.mu.Unlock()
		return // flushed meanwhile
	}
	held, last, h := ru.held, ru.last, ru.h
	if held == 0 {
		delete(s.runs, k)
	} else {
		ru.held = 0
		ru.timer.Reset(s.every)
	}
	s.mu.Unlock()
	if held > 0 {
		s.write(h, held, last)
	}
}

// write writes the record saying that held more like last were left out.
func (s *limitState) write(h slog.Handler, held int, last slog.Record) {
	r := slog.NewRecord(time.Now(), last.Level, fmt.Sprintf("%s (and %d more like it in the last %s)", last.Message, held, s.every), 0)
	last.Attrs(func(a slog.Attr) bool {
		r.AddAttrs(a)
		return true
	})
	r.AddAttrs(slog.Int("repeated", held))
	_ = h.Handle(context.Background(), r)
}

// Flush writes the counts of the windows still open and forgets them.
func (l *Limiter) Flush() {
	s := l.s
	s.mu.Lock()
	runs := s.runs
	s.runs = map[runKey]*run{}
	s.mu.Unlock()
	for _, ru := range runs {
		ru.timer.Stop()
		if ru.held > 0 {
			s.write(ru.h, ru.held, ru.last)
		}
	}
}

// StdLogger returns a *log.Logger (what net/http's Server.ErrorLog takes) writing
// each line as a warning through l. http's "TLS handshake error from ADDR: ERR" lines
// become the message "http: TLS handshake error" with the remote address and error as
// attributes, so that a scanner's many handshakes are one message to count.
func StdLogger(l *slog.Logger) *log.Logger {
	return log.New(stdWriter{l}, "", 0)
}

type stdWriter struct{ l *slog.Logger }

const tlsPrefix = "http: TLS handshake error from "

func (w stdWriter) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	if rest, ok := strings.CutPrefix(line, tlsPrefix); ok {
		remote, err, _ := strings.Cut(rest, ": ")
		w.l.Warn(strings.TrimSuffix(tlsPrefix, " from "), "remote", remote, "err", err)
	} else {
		w.l.Warn(line)
	}
	return len(p), nil
}

// grpcLogger is the logger gRPC writes to for the whole process (gRPC has one, set
// before it is first used, which init does): it writes through the logger SetGRPC
// gave, or slog's default. gRPC's info and warning lines (connection state changes,
// failed handshakes) are debug records here, as gRPC itself shows only errors unless
// asked.
var grpcTarget atomic.Pointer[slog.Logger]

func init() { grpclog.SetLoggerV2(grpcLogger{}) }

// SetGRPC makes gRPC's internal logging write through l.
func SetGRPC(l *slog.Logger) { grpcTarget.Store(l) }

type grpcLogger struct{}

func (grpcLogger) log(level slog.Level, msg string) {
	l := grpcTarget.Load()
	if l == nil {
		l = slog.Default()
	}
	l.Log(context.Background(), level, strings.TrimSuffix(msg, "\n"))
}

func (g grpcLogger) Info(args ...any) { g.log(slog.LevelDebug, fmt.Sprint(args...)) }

func (g grpcLogger) Infoln(args ...any) { g.log(slog.LevelDebug, fmt.Sprintln(args...)) }

func (g grpcLogger) Infof(format string, args ...any) {
	g.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}

func (g grpcLogger) Warning(args ...any) { g.log(slog.LevelDebug, fmt.Sprint(args...)) }

func (g grpcLogger) Warningln(args ...any) { g.log(slog.LevelDebug, fmt.Sprintln(args...)) }

func (g grpcLogger) Warningf(format string, args ...any) {
	g.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}

func (g grpcLogger) Error(args ...any) { g.log(slog.LevelError, fmt.Sprint(args...)) }

func (g grpcLogger) Errorln(args ...any) { g.log(slog.LevelError, fmt.Sprintln(args...)) }

func (g grpcLogger) Errorf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
}

func (g grpcLogger) Fatal(args ...any) { g.log(slog.LevelError, fmt.Sprint(args...)); os.Exit(1) }

func (g grpcLogger) Fatalln(args ...any) { g.log(slog.LevelError, fmt.Sprintln(args...)); os.Exit(1) }

func (g grpcLogger) Fatalf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// V reports whether verbosity level v is logged: gRPC's verbose lines are not.
func (grpcLogger) V(v int) bool { return v <= 0 }
