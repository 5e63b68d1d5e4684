package server

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// startIndex starts the index of nested sets over the server's store, with its
// metrics registered; Close stops it.
func (s *Server) startIndex() *materialize.Index {
	s.indexBudget = materialize.NewBudget(s.cfg.MaterializeMaxBytes)
	x, stop := s.newIndex(s.store, s.schemaAtRevision, s.cfg.Logger, 100*time.Millisecond)
	s.index, s.stopIndex = x, stop
	s.registerIndexMetrics(x)
	return x
}

// newIndex starts an index of nested sets over st (the server's store, or a Permify
// tenant's), whose schema at a revision schemaAt compiles, logging to logger, drawing
// on the server's index budget; stop ends its upkeep. A SQL store's change feed is
// polled every poll.
func (s *Server) newIndex(st store.Store, schemaAt func(context.Context, store.Revision) (*ir.Schema, error), logger *slog.Logger, poll time.Duration) (x *materialize.Index, stop func()) {
	window := max(s.cfg.QuantizationWindow, 0)
	// The SQL stores' change feeds are polled (other processes write to them): a read
	// ahead of the index would wait for the next poll, so it is evaluated at once, and
	// the idle feed is asked for its head as often as it polls anyway.
	var wait, checkpoints time.Duration
	if s.cfg.Datastore == nil && (s.cfg.DatastoreEngine == "postgres" || s.cfg.DatastoreEngine == "cockroachdb") {
		wait, checkpoints = -1, poll
	}
	x = materialize.New(materialize.Config{
		Store:    st,
		SchemaAt: schemaAt,
		Budget:   s.indexBudget,
		// A minimize_latency read may pick a revision up to a window (and its
		// smearing) after the revision stopped being the newest.
		Retain:          2*window + time.Second,
		Wait:            wait,
		CheckpointEvery: checkpoints,
		Logger:          logger,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.Run(ctx)
	}()
	return x, func() {
		cancel()
		<-done
	}
}

// registerIndexMetrics adds the latch_materialize_* metrics.
func (s *Server) registerIndexMetrics(x *materialize.Index) {
	stat := func(f func(materialize.Stats) float64) func() float64 { return func() float64 { return f(x.Stats()) } }
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "latch", Subsystem: "materialize", Name: name, Help: help}
	}
	s.metrics.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("ready", "1 when the index is built and following the datastore, 0 while it builds or is off.")),
			stat(readiness)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("applied_revision_lag", "Revisions the datastore has committed that the index has not applied yet.")),
			func() float64 {
				st := x.Stats()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				head, err := s.store.HeadRevision(ctx)
				if !st.Ready || err != nil || head < st.Applied {
					return 0
				}
				return float64(head - st.Applied)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("entries", "(subject, set) and (set, ancestor) entries the index holds.")),
			stat(func(st materialize.Stats) float64 { return float64(st.Entries) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("bytes", "Memory the index holds.")),
			stat(func(st materialize.Stats) float64 { return float64(st.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("budget_used_bytes", "Memory the index and the Permify tenants' indexes hold together, which --materialize-max-bytes bounds.")),
			func() float64 { return float64(s.indexBudget.Used()) }),
		&s.tenantIndexes,
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("answers_total", "Set memberships the index answered.")),
			stat(func(st materialize.Stats) float64 { return float64(st.Answers) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("fallbacks_total", "Reads of indexed relations the index left to evaluation.")),
			stat(func(st materialize.Stats) float64 { return float64(st.Fallbacks) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("builds_total", "Builds of the index (at start, after a breaking schema change or a failure).")),
			stat(func(st materialize.Stats) float64 { return float64(st.Builds) })),
	)
}

// readiness is an index's ready gauge: 1 when it is built and following its store.
func readiness(st materialize.Stats) float64 {
	if st.Ready {
		return 1
	}
	return 0
}

// tenantIndexes are the Permify tenants' indexes of nested sets, by tenant, for their
// metrics (latch_materialize_tenant_*).
type tenantIndexes struct {
	mu sync.Mutex
	m  map[string]*materialize.Index
}

// add records tenant's index x and returns what forgets it.
func (t *tenantIndexes) add(tenant string, x *materialize.Index) (forget func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*materialize.Index{}
	}
	t.m[tenant] = x
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.m[tenant] == x {
			delete(t.m, tenant)
		}
	}
}

var (
	tenantLabels      = []string{"tenant"}
	tenantIndexReady  = prometheus.NewDesc("latch_materialize_tenant_ready", "1 when the Permify tenant's index is built and following its store, 0 while it builds or is off.", tenantLabels, nil)
	tenantIndexBytes  = prometheus.NewDesc("latch_materialize_tenant_bytes", "Memory the Permify tenant's index holds.", tenantLabels, nil)
	tenantIndexEntry  = prometheus.NewDesc("latch_materialize_tenant_entries", "(subject, set) and (set, ancestor) entries the Permify tenant's index holds.", tenantLabels, nil)
	tenantIndexAnswer = prometheus.NewDesc("latch_materialize_tenant_answers_total", "Set memberships the Permify tenant's index answered.", tenantLabels, nil)
	tenantIndexFall   = prometheus.NewDesc("latch_materialize_tenant_fallbacks_total", "Reads of the Permify tenant's indexed relations its index left to evaluation.", tenantLabels, nil)
)

func (t *tenantIndexes) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tenantIndexReady, tenantIndexBytes, tenantIndexEntry, tenantIndexAnswer, tenantIndexFall} {
		ch <- d
	}
}

func (t *tenantIndexes) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	indexes := maps.Clone(t.m)
	t.mu.Unlock()
	for _, tenant := range slices.Sorted(maps.Keys(indexes)) {
		st := indexes[tenant].Stats()
		ch <- prometheus.MustNewConstMetric(tenantIndexReady, prometheus.GaugeValue, readiness(st), tenant)
		ch <- prometheus.MustNewConstMetric(tenantIndexBytes, prometheus.GaugeValue, float64(st.Bytes), tenant)
		ch <- prometheus.MustNewConstMetric(tenantIndexEntry, prometheus.GaugeValue, float64(st.Entries), tenant)
		ch <- prometheus.MustNewConstMetric(tenantIndexAnswer, prometheus.CounterValue, float64(st.Answers), tenant)
		ch <- prometheus.MustNewConstMetric(tenantIndexFall, prometheus.CounterValue, float64(st.Fallbacks), tenant)
	}
}
