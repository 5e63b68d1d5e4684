package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Admission control: a cap on requests executing at once plus a bounded queue with a
// short deadline; past that, an immediate refusal with a retry hint. Cheap calls
// (checks, writes, schema reads) and expensive ones (lookups, reads, import, export,
// compiling a client's schema) have
// separate limits, so a burst of lookups cannot starve checks; the playground has a
// small limit of its own that yields to the API. Every surface takes its calls through
// the same limiters (gRPC, and the gateway through it, here; the HTTP surfaces through
// httpSurface) and renders a refusal, an *overloadError, in its own shape. Watch streams
// (bounded by watchLimit) and health checks are not admitted: they are long-lived or
// must answer under overload.

// admissionClass names a limiter in metrics and messages.
type admissionClass string

const (
	classCheap      admissionClass = "cheap"
	classExpensive  admissionClass = "expensive"
	classPlayground admissionClass = "playground"
)

// expensiveMethods are the calls whose cost grows with the data, or with a schema the
// client sends (compiling megabytes of schema takes seconds of a core).
var expensiveMethods = []string{
	"/authzed.api.v1.SchemaService/WriteSchema",
	"/authzed.api.v1.SchemaService/DiffSchema",
	"/authzed.api.v1.PermissionsService/LookupResources",
	"/authzed.api.v1.PermissionsService/LookupSubjects",
	"/authzed.api.v1.PermissionsService/ReadRelationships",
	"/authzed.api.v1.PermissionsService/ImportBulkRelationships",
	"/authzed.api.v1.PermissionsService/ExportBulkRelationships",
	"/authzed.api.v1.ExperimentalService/BulkImportRelationships",
	"/authzed.api.v1.ExperimentalService/BulkExportRelationships",
	"/openfga.v1.OpenFGAService/WriteAuthorizationModel",
	"/openfga.v1.OpenFGAService/Read",
	"/openfga.v1.OpenFGAService/ReadChanges",
	"/openfga.v1.OpenFGAService/Expand",
	"/openfga.v1.OpenFGAService/ListObjects",
	"/openfga.v1.OpenFGAService/StreamedListObjects",
	"/openfga.v1.OpenFGAService/ListUsers",
}

// limiter admits up to cap requests at once and queues up to queue more, each for at
// most wait.
type limiter struct {
	class  admissionClass
	slots  chan struct{}
	queued atomic.Int64
	queue  int64
	wait   time.Duration
	// yieldTo are the limiters this one gives way to: while any of them has calls
	// waiting, this one admits nothing new (the playground yields to the API).
	yieldTo []*limiter
	// The class's series of the admission metrics.
	inflightGauge, queuedGauge prometheus.Gauge
	shedCount                  prometheus.Counter
}

func newLimiter(class admissionClass, capacity, queue int, wait time.Duration, m *metrics) *limiter {
	return &limiter{
		class: class, slots: make(chan struct{}, capacity), queue: int64(queue), wait: wait,
		inflightGauge: m.inflight.WithLabelValues(string(class)),
		queuedGauge:   m.queued.WithLabelValues(string(class)),
		shedCount:     m.shed.WithLabelValues(string(class)),
	}
}

// acquire takes a slot, waiting in the queue if there is room, or fails fast with an
// *overloadError, or with ctx's error.
func (l *limiter) acquire(ctx context.Context) error {
	for _, o := range l.yieldTo {
		if o.queued.Load() > 0 {
			return l.shed(fmt.Sprintf("%s requests are waiting, which go first", o.class))
		}
	}
	select {
	case l.slots <- struct{}{}:
		l.inflightGauge.Inc()
		return nil
	default:
	}
	if l.queued.Add(1) > l.queue {
		l.queued.Add(-1)
		return l.shed("the queue is full")
	}
	l.queuedGauge.Inc()
	defer func() {
		l.queued.Add(-1)
		l.queuedGauge.Dec()
	}()
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	select {
	case l.slots <- struct{}{}:
		l.inflightGauge.Inc()
		return nil
	case <-timer.C:
		return l.shed(fmt.Sprintf("no slot freed within %v", l.wait))
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *limiter) release() {
	<-l.slots
	l.inflightGauge.Dec()
}

func (l *limiter) shed(why string) error {
	l.shedCount.Inc()
	return &overloadError{class: l.class, capacity: cap(l.slots), why: why, retry: l.wait}
}

// overloadError is a limiter's refusal: every surface answers it as its "too many
// requests" (gRPC RESOURCE_EXHAUSTED with a RetryInfo, HTTP 429 or 503 with
// Retry-After).
type overloadError struct {
	class    admissionClass
	capacity int
	why      string
	retry    time.Duration
}

func (e *overloadError) Error() string {
	return fmt.Sprintf("server overloaded: %d %s requests are running and %s; retry after a short delay", e.capacity, e.class, e.why)
}

// admissionStatus is the gRPC status of an acquire's error.
func admissionStatus(err error) error {
	oe, ok := errors.AsType[*overloadError](err)
	if !ok {
		return status.FromContextError(err).Err()
	}
	st := status.New(codes.ResourceExhausted, oe.Error())
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(oe.retry)}); err == nil {
		st = d
	}
	return st.Err()
}

// admission routes each call to its limiter.
type admission struct {
	cheap, expensive, playground *limiter
}

func newAdmission(cfg Config, m *metrics) *admission {
	a := &admission{
		cheap:     newLimiter(classCheap, cfg.MaxInflightCheap, cfg.MaxQueuedCheap, cfg.AdmissionWait, m),
		expensive: newLimiter(classExpensive, cfg.MaxInflightExpensive, cfg.MaxQueuedExpensive, cfg.AdmissionWait, m),
		// The playground's evaluations wait for a turn as long as they may run.
		playground: newLimiter(classPlayground, cfg.PlaygroundMaxInflight, cfg.PlaygroundMaxQueued, cfg.PlaygroundTimeout, m),
	}
	a.playground.yieldTo = []*limiter{a.cheap, a.expensive}
	return a
}

// of returns class's limiter; nil for a call that is not admitted.
func (a *admission) of(class admissionClass) *limiter {
	switch class {
	case classCheap:
		return a.cheap
	case classExpensive:
		return a.expensive
	case classPlayground:
		return a.playground
	}
	return nil
}

// httpSurface is an HTTP API served under the admission classes: classOf names a
// request's class ("" admits it without a limit), and overloaded answers a refusal in
// the surface's own error shape. A new API surface plugs in with one line:
// s.adm.guard(itsSurface, itsHandler).
type httpSurface struct {
	classOf    func(*http.Request) admissionClass
	overloaded func(w http.ResponseWriter, err *overloadError)
}

// guard takes each request to next through its class's limiter.
func (a *admission) guard(surf httpSurface, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := a.of(surf.classOf(r))
		if l == nil {
			next.ServeHTTP(w, r)
			return
		}
		if err := l.acquire(r.Context()); err != nil {
			if oe, ok := errors.AsType[*overloadError](err); ok {
				w.Header().Set("Retry-After", strconv.Itoa(max(1, int(oe.retry.Round(time.Second)/time.Second))))
				surf.overloaded(w, oe)
			}
			return // a client that went away is not answered
		}
		defer l.release()
		next.ServeHTTP(w, r)
	})
}

func (a *admission) limiterFor(method string) *limiter {
	switch {
	case strings.HasPrefix(method, "/grpc.health."), strings.HasPrefix(method, "/grpc.reflection."),
		method == "/authzed.api.v1.WatchService/Watch":
		return nil
	}
	for _, m := range expensiveMethods {
		if m == method {
			return a.expensive
		}
	}
	return a.cheap
}
