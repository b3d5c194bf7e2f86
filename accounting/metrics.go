package accounting

import (
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/meter"
)

type metrics struct {
	receipts      *prometheus.CounterVec
	disputes      *prometheus.CounterVec
	forkProofs    *prometheus.CounterVec
	grantRefusals *prometheus.CounterVec
	reports       prometheus.Counter
	windows       prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	c := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "accounting", Name: name, Help: help}, labels)
	}
	m := &metrics{
		receipts:      c("receipts_total", "Receipts co-signed (result=signed) and refused (result=refused, with reason).", "result", "reason"),
		disputes:      c("disputes_total", "Disputes opened (state=opened) and windows reported disputed (state=disputed).", "state"),
		forkProofs:    c("fork_proofs_total", "Fork proofs built here (source=built), received and verified (source=received) or refused (source=refused).", "source"),
		grantRefusals: c("grant_refusals_total", "Requests refused for want of a grant or over a grant's quota.", "service", "reason"),
		reports:       prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "accounting", Name: "reports_total", Help: "Window reports signed."}),
		windows:       prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "accounting", Name: "windows_closed_total", Help: "Accounting windows closed."}),
	}
	// Every series exists from the start, at 0, so a dashboard sees it
	// before the first event.
	m.receipts.WithLabelValues("signed", "")
	m.receipts.WithLabelValues("refused", "invalid")
	for _, st := range []string{"opened", "disputed"} {
		m.disputes.WithLabelValues(st)
	}
	for _, src := range []string{"built", "received", "refused"} {
		m.forkProofs.WithLabelValues(src)
	}
	for _, svc := range meter.Names() {
		m.grantRefusals.WithLabelValues(svc, "over_quota")
		m.grantRefusals.WithLabelValues(svc, "no_grant")
	}
	if reg != nil {
		reg.MustRegister(m.receipts, m.disputes, m.forkProofs, m.grantRefusals, m.reports, m.windows)
	}
	return m
}
