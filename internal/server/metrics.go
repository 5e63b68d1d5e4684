package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// metrics are the server's Prometheus series, in a registry of its own so that two
// servers in one process (tests, embedding) do not collide.
type metrics struct {
	registry *prometheus.Registry
	latency  *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
	queued   *prometheus.GaugeVec
	shed     *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "latch", Subsystem: "grpc", Name: "request_duration_seconds",
			Help:    "Time to serve a gRPC call, by method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 100µs to ~13s
		}, []string{"method", "code"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "latch", Subsystem: "admission", Name: "inflight_requests",
			Help: "Requests executing, by admission class.",
		}, []string{"class"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "latch", Subsystem: "admission", Name: "queued_requests",
			Help: "Requests waiting for a slot, by admission class.",
		}, []string{"class"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "admission", Name: "shed_requests_total",
			Help: "Requests refused with RESOURCE_EXHAUSTED, by admission class.",
		}, []string{"class"}),
	}
	m.registry.MustRegister(m.latency, m.inflight, m.queued, m.shed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(method string, start time.Time, err error) {
	m.latency.WithLabelValues(method, status.Code(err).String()).Observe(time.Since(start).Seconds())
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.observe(info.FullMethod, start, err)
	return resp, err
}

func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	m.observe(info.FullMethod, start, err)
	return err
}

// handler serves /metrics and /debug/pprof on a mux of its own (never
// http.DefaultServeMux, which any imported package may have added to).
func (m *metrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
