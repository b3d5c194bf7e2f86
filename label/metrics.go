package label

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the label series on /metrics (spec/labels.md "Metrics").
type Metrics struct {
	received *prometheus.CounterVec
	verdicts *prometheus.CounterVec
	refusals *prometheus.CounterVec
	// set is the policy's set, read by the held gauges.
	set atomic.Pointer[Set]
}

// NewMetrics makes the series and registers them on reg unless nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	o := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "labels", Name: name, Help: help}
	}
	m := &Metrics{
		received: prometheus.NewCounterVec(o("received_total", "Labels and listed reporters' reports received, by what became of them: kept, duplicate, invalid, refused_labeller_full, refused_full, evicted, retracted, expired, report_ignored (a report from a key not listed)."), []string{"result"}),
		verdicts: prometheus.NewCounterVec(o("verdicts_total", "Events whose labels passed the threshold, by rule (author, event, blob) and the policy applied (count, hold, refuse)."), []string{"rule", "policy"}),
		refusals: prometheus.NewCounterVec(o("refusals_total", "Events refused with blocked: because of labels, by rule (author, event, blob)."), []string{"rule"}),
	}
	for _, r := range []string{"kept", "duplicate", "invalid", "refused_labeller_full", "refused_full", "evicted", "retracted", "expired", "report_ignored"} {
		m.received.WithLabelValues(r)
	}
	for _, r := range []string{RuleAuthor, RuleEvent, RuleBlob} {
		m.refusals.WithLabelValues(r)
	}
	held := func(trusted bool) func() float64 {
		return func() float64 {
			s := m.set.Load()
			if s == nil {
				return 0
			}
			all, t := s.Len()
			if trusted {
				return float64(t)
			}
			return float64(all - t)
		}
	}
	if reg != nil {
		reg.MustRegister(m.received, m.verdicts, m.refusals,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetmesh", Subsystem: "labels", Name: "held",
				Help: "Labels held, from labellers with standing here when they arrived (tier=\"trusted\") or without.", ConstLabels: prometheus.Labels{"tier": "trusted"}}, held(true)),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetmesh", Subsystem: "labels", Name: "held",
				Help: "Labels held, from labellers with standing here when they arrived (tier=\"trusted\") or without.", ConstLabels: prometheus.Labels{"tier": "untrusted"}}, held(false)))
	}
	return m
}
