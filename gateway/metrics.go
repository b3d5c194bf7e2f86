package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/internal/progress"
)

type metrics struct {
	carried   *prometheus.CounterVec // direction
	refused   *prometheus.CounterVec // direction: by the boundary policy
	rejected  *prometheus.CounterVec // prefix: OK false from the backend, final
	connected prometheus.Gauge
	backlog   prometheus.Gauge
	dropped   prometheus.Counter
	catchups  *prometheus.CounterVec // direction, method
	refusals  *prometheus.CounterVec // request, shape
	degraded  prometheus.Gauge
	refusing  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		carried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_gateway_events_carried_total",
			Help: "Events the gateway carried, by direction (to_mesh: stored locally from the backend; to_backend: acknowledged by the backend).",
		}, []string{"direction"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_gateway_policy_refusals_total",
			Help: "Events the boundary policy kept from crossing at the gateway, by direction (rules in fleetmesh_boundary_refusals_total).",
		}, []string{"direction"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_gateway_backend_rejections_total",
			Help: "Events the backend refused for good (OK false), by the message's prefix.",
		}, []string{"prefix"}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetmesh_gateway_backend_connected",
			Help: "1 while the gateway holds a working connection to the backend, else 0.",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetmesh_gateway_backlog",
			Help: "Events queued for the backend and not yet acknowledged.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetmesh_gateway_queue_dropped_total",
			Help: "Events that found the backend queue full; the next catch-up carries them.",
		}),
		catchups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_gateway_catchups_total",
			Help: "Completed catch-ups, by direction and method (negentropy or since), and completed full walks (method full-walk).",
		}, []string{"direction", "method"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_gateway_backend_req_refusals_total",
			Help: "REQs the backend answered with NOTICE or CLOSED instead of EOSE, by request (live, catch-up, fetch) and shape (full, or plain: without limit, since and until).",
		}, []string{"request", "shape"}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetmesh_gateway_backend_degraded",
			Help: "1 once the backend refused filters with limit, since or until and the gateway asks it with plain filters; /healthz has its words.",
		}),
		refusing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetmesh_gateway_backend_refusing",
			Help: "1 while the backend refuses REQs in every shape (nothing is carried to the mesh); /healthz has its words.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.carried, m.refused, m.rejected, m.connected, m.backlog, m.dropped, m.catchups, m.refusals, m.degraded, m.refusing} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// registerProgress exports each direction's catch-up as
// fleetmesh_gateway_catchup_pending_events{direction}, read when scraped.
func registerProgress(reg prometheus.Registerer, byDir map[string]*progress.Tracker) error {
	if reg == nil {
		return nil
	}
	for dir, t := range byDir {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "fleetmesh_gateway_catchup_pending_events",
			Help:        "Events the gateway's catch-up with its backend still has to move, by direction (an estimate: see fleetmesh status's gateway lines).",
			ConstLabels: prometheus.Labels{"direction": dir},
		}, func() float64 { return float64(t.Get().Pending) })
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return nil
}
