package server

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latch-authz/latch/internal/buildinfo"

	"github.com/authzed/authzed-go/pkg/responsemeta"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/latch-authz/latch/internal/store"
)

// metrics are the server's Prometheus series, in a registry of its own so that two
// servers in one process (tests, embedding) do not collide.
type metrics struct {
	registry *prometheus.Registry
	latency  *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
	queued   *prometheus.GaugeVec
	shed     *prometheus.CounterVec
	// queryLatency times each datastore query an RPC makes; checkQueries counts the
	// queries one check needed (the engine batches, so this is its dispatch count).
	queryLatency prometheus.Histogram
	checkQueries prometheus.Histogram
	// authzen times AuthZEN's HTTP requests (which, unlike OpenFGA's, are not gRPC
	// calls), by endpoint and HTTP status.
	authzen *prometheus.HistogramVec
	log     *slog.Logger
}

func newMetrics(log *slog.Logger) *metrics {
	m := &metrics{
		log:      log,
		registry: prometheus.NewRegistry(),
		queryLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "latch", Subsystem: "datastore", Name: "query_duration_seconds",
			Help:    "Time to run one datastore query, from the call until its last row was read.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 18), // 10µs to ~1.3s
		}),
		checkQueries: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "latch", Subsystem: "check", Name: "datastore_queries",
			Help:    "Datastore queries one CheckPermission needed (0 when answered from the cache).",
			Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "latch", Subsystem: "grpc", Name: "request_duration_seconds",
			Help:    "Time to serve a gRPC call, by method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 100µs to ~13s
		}, []string{"method", "code"}),
		authzen: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "latch", Subsystem: "authzen", Name: "request_duration_seconds",
			Help:    "Time to serve an AuthZEN request, by endpoint (evaluation, evaluations, search/subject, ...) and HTTP status.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 100µs to ~13s
		}, []string{"endpoint", "code"}),
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
	m.registry.MustRegister(m.latency, m.authzen, m.inflight, m.queued, m.shed, m.queryLatency, m.checkQueries,
		buildInfoMetric(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// buildInfoMetric is latch_build_info, always 1, whose labels say what the binary is,
// so that dashboards can tell which version each node runs.
func buildInfoMetric() prometheus.Collector {
	info := buildinfo.Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "latch", Name: "build_info",
		Help:        "Always 1; the labels are the version, commit and Go toolchain this binary was built with.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": info.Commit, "goversion": info.GoVersion},
	})
	g.Set(1)
	return g
}

// registerReads adds latch_datastore_reads_total{target="primary"|"replica"} when st
// may read from replicas: how much of the read load the replicas take off the primary.
func (m *metrics) registerReads(st store.Store) {
	rs, ok := st.(store.Replicated)
	if !ok {
		return
	}
	counter := func(target string, n func(store.ReadStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "latch", Subsystem: "datastore", Name: "reads_total",
			Help:        "Pages of relationships read at a revision, by where they were read: the primary or a read replica.",
			ConstLabels: prometheus.Labels{"target": target},
		}, func() float64 { return float64(n(rs.ReadStats())) })
	}
	m.registry.MustRegister(
		counter("primary", func(st store.ReadStats) uint64 { return st.Primary }),
		counter("replica", func(st store.ReadStats) uint64 { return st.Replica }),
	)
}

// traceCall records a finished call with its request id (the client's x-request-id
// or one made up for it): a log line at debug level, and an attribute of the call's
// span when it is traced.
func (m *metrics) traceCall(ctx context.Context, method string, code codes.Code, elapsed time.Duration) {
	span := trace.SpanFromContext(ctx)
	logged := m.log.Enabled(ctx, slog.LevelDebug)
	if !logged && !span.IsRecording() {
		return
	}
	id := requestID(ctx)
	span.SetAttributes(attribute.String("latch.request_id", id))
	if logged {
		m.log.LogAttrs(ctx, slog.LevelDebug, "rpc", slog.String("request_id", id),
			slog.String("method", method), slog.String("code", code.String()), slog.Duration("elapsed", elapsed))
	}
}

// requestID returns the call's request id (respmeta.go), else the client's
// x-request-id, else a fresh random one.
func requestID(ctx context.Context) string {
	if m := callMetaFrom(ctx); m != nil {
		return m.id
	}
	if v := metadata.ValueFromIncomingContext(ctx, string(responsemeta.RequestID)); len(v) > 0 && v[0] != "" {
		return v[0]
	}
	return newRequestID()
}

// newRequestID returns a random request id: 16 hex digits. It identifies a call in
// logs and traces and guards nothing, so the runtime's fast generator makes it.
func newRequestID() string {
	var raw [8]byte
	binary.LittleEndian.PutUint64(raw[:], rand.Uint64())
	var id [16]byte
	hex.Encode(id[:], raw[:])
	return string(id[:])
}

// timedReader times the datastore queries made through it and counts them, and traces
// them within traced calls.
type timedReader struct {
	store.Reader
	m       *metrics
	tracer  trace.Tracer
	traced  bool // the call is traced (sampled), decided once for its queries
	queries atomic.Int64
}

// timed wraps the reader r that serves the call of ctx.
func (s *Server) timed(ctx context.Context, r store.Reader) *timedReader {
	return &timedReader{Reader: r, m: s.metrics, tracer: s.tracer, traced: trace.SpanFromContext(ctx).IsRecording()}
}

func (r *timedReader) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	r.queries.Add(1)
	var query iter.Seq2[store.Item, error]
	if r.traced {
		query = traceQuery(ctx, r.tracer, r.Reader, f, opts)
	} else {
		query = r.Reader.Query(ctx, f, opts)
	}
	return func(yield func(store.Item, error) bool) {
		start := time.Now()
		query(yield)
		r.m.queryLatency.Observe(time.Since(start).Seconds())
	}
}

// QueryEach is Query for a visitor (store.Each), timed and counted alike.
func (r *timedReader) QueryEach(ctx context.Context, f store.Filter, opts store.QueryOptions, v store.Visitor) error {
	if r.traced {
		return store.Each(ctx, iterReader{r}, f, opts, v)
	}
	r.queries.Add(1)
	start := time.Now()
	err := store.Each(ctx, r.Reader, f, opts, v)
	r.m.queryLatency.Observe(time.Since(start).Seconds())
	return err
}

// iterReader hides a reader's QueryEach, so that store.Each goes through its Query.
type iterReader struct{ store.Reader }

// handler serves /metrics and, when asked for, Go's profiles under /debug/pprof, on a
// mux of its own (never http.DefaultServeMux, which any imported package may have
// added to). The command line (pprof's cmdline) is never served: it may hold the
// preshared key or a database password. With key set, every path needs it as a
// bearer token.
func (m *metrics) handler(key string, withPProf bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	if withPProf {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	}
	if key == "" {
		return mux
	}
	auth := newAuthenticator([]string{key})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		switch {
		case !ok || !strings.EqualFold(scheme, "bearer"):
			w.Header().Set("WWW-Authenticate", `Bearer realm="latch metrics"`)
			http.Error(w, "missing authorization: send the header `Authorization: Bearer <metrics preshared key>`", http.StatusUnauthorized)
		case !auth.matches(token):
			http.Error(w, "invalid metrics preshared key", http.StatusForbidden)
		default:
			mux.ServeHTTP(w, r)
		}
	})
}
