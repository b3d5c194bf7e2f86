package standing

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the standing series on /metrics.
type Metrics struct {
	recomputations   prometheus.Counter
	recomputeSeconds prometheus.Histogram
	updates          prometheus.Counter
	updateSeconds    prometheus.Histogram
	repaired         prometheus.Counter
	receipts         *prometheus.CounterVec
	forks            prometheus.Counter
	nodes            prometheus.Gauge
	lastRecompute    prometheus.Gauge
}

// NewMetrics makes the series and registers them on reg unless nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	o := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "fleetmesh", Subsystem: "standing", Name: name, Help: help}
	}
	m := &Metrics{
		recomputations:   prometheus.NewCounter(prometheus.CounterOpts(o("recomputations_total", "Full recomputations: every walk drawn afresh."))),
		recomputeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "fleetmesh", Subsystem: "standing", Name: "recompute_seconds", Help: "Time of one full recomputation (walks and scores).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
		updates:          prometheus.NewCounter(prometheus.CounterOpts(o("updates_total", "Incremental updates: an edge's service grew and the walks through it were repaired."))),
		updateSeconds:    prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "fleetmesh", Subsystem: "standing", Name: "update_seconds", Help: "Time of one incremental update.", Buckets: prometheus.ExponentialBuckets(0.00001, 4, 8)}),
		repaired:         prometheus.NewCounter(prometheus.CounterOpts(o("walks_repaired_total", "Walks rerouted, extended or cut by incremental updates."))),
		receipts:         prometheus.NewCounterVec(prometheus.CounterOpts(o("receipts_total", "Receipts taken in: counted, disputed (a wall), ignored (another's dispute) or refused.")), []string{"result"}),
		forks:            prometheus.NewCounter(prometheus.CounterOpts(o("fork_proofs_total", "Fork proofs taken in (both parties walled, standing zero)."))),
		nodes:            prometheus.NewGauge(prometheus.GaugeOpts(o("nodes", "Nodes this view holds receipts of."))),
		lastRecompute:    prometheus.NewGauge(prometheus.GaugeOpts(o("last_recompute_seconds", "Time the last full recomputation took."))),
	}
	for _, r := range []string{"counted", "disputed", "ignored", "refused"} {
		m.receipts.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.recomputations, m.recomputeSeconds, m.updates, m.updateSeconds, m.repaired, m.receipts, m.forks, m.nodes, m.lastRecompute)
	}
	return m
}
