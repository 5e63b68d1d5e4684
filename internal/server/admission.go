package server

import (
	"context"
	"fmt"
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
// short deadline; past that, an immediate RESOURCE_EXHAUSTED with a retry hint. Cheap
// calls (checks, writes, schema reads) and expensive ones (lookups, reads, import,
// export, compiling a client's schema) have separate limits, so a burst of lookups cannot starve checks. Watch streams and
// health checks are not admitted: they are long-lived or must answer under overload.

// admissionClass names a limiter in metrics and messages.
type admissionClass string

const (
	classCheap     admissionClass = "cheap"
	classExpensive admissionClass = "expensive"
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
}

// limiter admits up to cap requests at once and queues up to queue more, each for at
// most wait.
type limiter struct {
	class  admissionClass
	slots  chan struct{}
	queued atomic.Int64
	queue  int64
	wait   time.Duration
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

// acquire takes a slot, waiting in the queue if there is room, or fails fast.
func (l *limiter) acquire(ctx context.Context) error {
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
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (l *limiter) release() {
	<-l.slots
	l.inflightGauge.Dec()
}

func (l *limiter) shed(why string) error {
	l.shedCount.Inc()
	st := status.New(codes.ResourceExhausted, fmt.Sprintf(
		"server overloaded: %d %s requests are running and %s; retry after a short delay", cap(l.slots), l.class, why))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(l.wait)}); err == nil {
		st = d
	}
	return st.Err()
}

// admission routes each call to its limiter.
type admission struct {
	cheap, expensive *limiter
}

func newAdmission(cfg Config, m *metrics) *admission {
	return &admission{
		cheap:     newLimiter(classCheap, cfg.MaxInflightCheap, cfg.MaxQueuedCheap, cfg.AdmissionWait, m),
		expensive: newLimiter(classExpensive, cfg.MaxInflightExpensive, cfg.MaxQueuedExpensive, cfg.AdmissionWait, m),
	}
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
