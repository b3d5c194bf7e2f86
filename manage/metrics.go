package manage

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count the API's calls and the lists' refusals.
type Metrics struct {
	calls    *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetmesh_manage_calls_total",
			Help: "NIP-86 management calls by method and HTTP status (401: bad authorization, 403: not an admin)."}, []string{"method", "status"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetmesh_manage_refusals_total",
			Help: "Events and connections refused by the operator's own lists, by rule."}, []string{"rule"}),
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.refusals)
	}
	return m
}

func (m *Metrics) call(method string, status int, failed bool) {
	if _, known := methodSet[method]; !known {
		method = "other"
	}
	s := strconv.Itoa(status)
	if status == 200 && failed {
		s = "error"
	}
	m.calls.WithLabelValues(method, s).Inc()
}

func (m *Metrics) refused(rule string) {
	if m != nil {
		m.refusals.WithLabelValues(rule).Inc()
	}
}

var methodSet = func() map[string]struct{} {
	s := map[string]struct{}{}
	for _, m := range methods {
		s[m] = struct{}{}
	}
	return s
}()
