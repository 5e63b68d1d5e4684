package cluster

import "github.com/prometheus/client_golang/prometheus"

// metrics are the cluster's Prometheus series.
type metrics struct {
	sent, failed           *prometheus.CounterVec
	downs, rejoined        *prometheus.CounterVec
	peerUp                 *prometheus.GaugeVec
	local, remote          prometheus.Counter
	busy, fallbacks        prometheus.Counter
	hedges, hedgesWon      prometheus.Counter
	received, receivedErrs prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "latch", Subsystem: "cluster", Name: name, Help: help}
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(opts(name, help)))
	}
	owned := prometheus.NewCounterVec(prometheus.CounterOpts(opts("subproblems_total",
		"Subproblems by where they were routed: local (this node owns them, or their owner is down) or remote.")), []string{"where"})
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts(opts("dispatch_sent_total",
			"Dispatches sent to each peer (one per batch of subproblems).")), []string{"peer"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts(opts("dispatch_failed_total",
			"Dispatches to each peer that failed (and were answered locally).")), []string{"peer"}),
		downs: prometheus.NewCounterVec(prometheus.CounterOpts(opts("peer_marked_down_total",
			"Times each peer was marked down (dispatches to it failed again and again).")), []string{"peer"}),
		rejoined: prometheus.NewCounterVec(prometheus.CounterOpts(opts("peer_rejoined_total",
			"Times each peer marked down answered a health probe and was taken back.")), []string{"peer"}),
		peerUp: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("peer_up",
			"1 while a peer takes dispatches, 0 while it is marked down.")), []string{"peer"}),
		local:        owned.WithLabelValues("local"),
		remote:       owned.WithLabelValues("remote"),
		busy:         counter("dispatch_busy_total", "Dispatches answered locally because the peer had --dispatch-concurrency-limit dispatches in flight."),
		fallbacks:    counter("dispatch_fallbacks_total", "Dispatches that failed and were answered locally."),
		hedges:       counter("hedges_total", "Slow dispatches for which a local answer was started (hedged)."),
		hedgesWon:    counter("hedges_won_total", "Hedged dispatches the local answer won."),
		received:     counter("dispatch_received_total", "Dispatches received from other nodes."),
		receivedErrs: counter("dispatch_received_errors_total", "Dispatches received that this node failed to answer (not those the caller stopped waiting for, as a hedge the caller won)."),
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.failed, m.downs, m.rejoined, m.peerUp, owned, m.busy, m.fallbacks, m.hedges, m.hedgesWon, m.received, m.receivedErrs)
	}
	return m
}

// forget drops a departed peer's series.
func (m *metrics) forget(peer string) {
	m.sent.DeleteLabelValues(peer)
	m.failed.DeleteLabelValues(peer)
	m.downs.DeleteLabelValues(peer)
	m.rejoined.DeleteLabelValues(peer)
	m.peerUp.DeleteLabelValues(peer)
}
