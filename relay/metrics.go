package relay

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	conns       prometheus.Gauge
	subs        prometheus.Gauge
	stored      *prometheus.CounterVec
	sent        prometheus.Counter
	rejected    *prometheus.CounterVec
	saveSeconds prometheus.Histogram
	reqSeconds  prometheus.Histogram
	// lookedUp counts the events REQs' lookups brought, by what the
	// node's rules made of them (lookup.go).
	lookedUp *prometheus.CounterVec
	// negMessages counts the NIP-77 messages clients sent, by type
	// (open, msg, close): what a browser leaf's catch-up costs.
	negMessages *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetmesh_relay_connections", Help: "Open client WebSocket connections.",
		}),
		subs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetmesh_relay_subscriptions", Help: "Open REQ subscriptions.",
		}),
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_relay_events_total", Help: "Events admitted, by store result.",
		}, []string{"result"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetmesh_relay_events_sent_total", Help: "Events sent to clients, stored answers and live deliveries.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_relay_rejections_total", Help: "Refused messages, by reason.",
		}, []string{"reason"}),
		saveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fleetmesh_relay_save_seconds", Help: "Time from save request to durable commit.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		reqSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fleetmesh_relay_req_seconds", Help: "Time from REQ to EOSE.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		lookedUp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_relay_lookup_events_total",
			Help: "Events the mesh brought to REQs' lookups, by what this node's rules made of them (stored, duplicate, superseded, deleted, expired, refused).",
		}, []string{"result"}),
		negMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_relay_neg_messages_total",
			Help: "NIP-77 messages clients sent, by type (open, msg, close).",
		}, []string{"type"}),
	}
	if reg != nil {
		reg.MustRegister(m.conns, m.subs, m.stored, m.sent, m.rejected, m.saveSeconds, m.reqSeconds, m.lookedUp, m.negMessages)
	}
	return m
}
