package compute

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the compute market's figures on /metrics.
type Metrics struct {
	runs     *prometheus.CounterVec // by outcome: runs this node executed for others
	fuel     *prometheus.CounterVec // by role
	jobs     *prometheus.CounterVec // by verdict: jobs this node requested
	disputes prometheus.Counter
	rechecks *prometheus.CounterVec // by result
}

// NewMetrics registers the compute market's metrics on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "compute", Name: "runs_total",
			Help: "Jobs this node ran for other nodes, by outcome (ok, trap, out_of_fuel, out_of_memory, stack_exhausted, deadline, output_too_large)."}, []string{"outcome"}),
		fuel: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "compute", Name: "fuel_total",
			Help: "Fuel burnt: by this node for others (role executor), by others for this node's jobs as they reported it (requester), by this node's own audits (auditor)."}, []string{"role"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "compute", Name: "jobs_total",
			Help: "Jobs this node requested, by verdict (ok, disagreement, inconclusive, failed)."}, []string{"verdict"}),
		disputes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "compute", Name: "disputes_total",
			Help: "Executors caught with a wrong result or a reveal that does not open its commitment."}),
		rechecks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "compute", Name: "rechecks_total",
			Help: "A caught executor's earlier unchecked results run again, by result (agreed, wrong, unavailable)."}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.fuel, m.jobs, m.disputes, m.rechecks)
	}
	return m
}
