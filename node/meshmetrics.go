package node

import (
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/placement"
	"fleetmesh.org/fleetmesh/meshsync"
)

// meshObserver exports what an operator needs to see of the mesh (issue
// 12): connected peers by class and transport, GossipSub traffic, sync
// sessions, rounds and bytes, lookups, durable shard coverage and the
// address book's size. Every label set is bounded: no label names a peer
// or a shard. NAT reachability and relay reservations are registerMetrics'.
type meshObserver struct {
	mp *meshPart

	peers, gossipBytes, gossipMessages                *prometheus.Desc
	syncSessions, syncRounds, syncEvents, syncBytes   *prometheus.Desc
	lookups, lookupDials, belowR, addrBook, replicate *prometheus.Desc
	relayPushed, syncPending, handedOff               *prometheus.Desc
}

func newMeshObserver(mp *meshPart) *meshObserver {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fleetmesh_mesh_"+name, help, labels, nil)
	}
	return &meshObserver{
		mp:             mp,
		peers:          d("peers", "Connected mesh peers, by the class their descriptor declares (unknown without one) and the transport of their best connection.", "class", "transport"),
		gossipBytes:    d("gossipsub_bytes_total", "GossipSub RPC bytes (messages and control) before muxing and encryption.", "direction"),
		gossipMessages: d("gossipsub_messages_total", "GossipSub event messages: published here, received (duplicates included), delivered to the store, dropped behind a full buffer, rejected as invalid.", "kind"),
		syncSessions:   d("sync_sessions_total", "Anti-entropy sessions this node started, by outcome.", "result"),
		syncRounds:     d("sync_rounds_total", "Negentropy round trips of the sessions this node started."),
		syncEvents:     d("sync_events_total", "Events fetched from peers and pushed to them by those sessions.", "direction"),
		syncBytes:      d("sync_bytes_total", "Bytes on sync protocol streams, both sides, lookups included.", "direction"),
		lookups:        d("lookups_total", "REQ lookups in the mesh: hit found at least one event, miss none.", "result"),
		lookupDials:    d("lookup_dials_total", "Known, unconnected peers dialled by lookups that missed among the peers asked first."),
		belowR:         d("shards_below_replication", "Author shards that fewer than R storage nodes hold in this node's placement."),
		replicate:      d("replication", "R, the storage nodes each author shard should be held by."),
		addrBook:       d("address_book_peers", "Peers remembered in the address book."),
		relayPushed:    d("relay_push_events_total", "New events peers reached only through a relay accepted from this node's pushes."),
		syncPending:    d("sync_pending_events", "Events this node's sync sessions found missing here or at a peer and have not moved yet (an estimate: see fleetmesh status's sync line)."),
		handedOff:      d("handoff_deleted_events_total", "Events deleted here after every holder of their shard took them: shards this node no longer keeps."),
	}
}

func (o *meshObserver) descs() []*prometheus.Desc {
	return []*prometheus.Desc{o.peers, o.gossipBytes, o.gossipMessages, o.syncSessions, o.syncRounds, o.syncEvents, o.syncBytes, o.lookups, o.lookupDials, o.belowR, o.replicate, o.addrBook, o.relayPushed, o.syncPending, o.handedOff}
}

func (o *meshObserver) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range o.descs() {
		ch <- d
	}
}

func (o *meshObserver) Collect(ch chan<- prometheus.Metric) {
	m := o.mp.m
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counts := m.PeerCounts()
	// The usual kinds are always exported, at zero when none is connected,
	// so that a lone node still shows fleetmesh_mesh_peers and a query for
	// a kind that comes and goes sees 0 rather than no series.
	for _, class := range []string{string(descriptor.ClassAnchor), string(descriptor.ClassHome), string(descriptor.ClassLeaf), "unknown"} {
		for _, transport := range []string{"tcp", "quic", "relay"} {
			k := mesh.PeerKind{Class: class, Transport: transport}
			if _, ok := counts[k]; !ok {
				counts[k] = 0
			}
		}
	}
	for k, n := range counts {
		gauge(o.peers, float64(n), k.Class, k.Transport)
	}
	s := m.Stats()
	counter(o.gossipBytes, s.RPCBytesReceived, "in")
	counter(o.gossipBytes, s.RPCBytesSent, "out")
	var invalid uint64
	for _, n := range s.Invalid {
		invalid += n
	}
	for kind, v := range map[string]uint64{"published": s.Published, "received": s.MessagesReceived, "delivered": s.Delivered, "dropped": s.Dropped, "invalid": invalid} {
		counter(o.gossipMessages, v, kind)
	}
	c := o.mp.sync.Counters()
	counter(o.syncSessions, c.Sessions-c.Failed, "ok")
	counter(o.syncSessions, c.Failed, "failed")
	counter(o.syncRounds, c.Rounds)
	counter(o.syncEvents, c.Fetched, "fetched")
	counter(o.syncEvents, c.Pushed, "pushed")
	in, out := m.ProtocolBytes(protocol.ID(meshsync.ProtocolID))
	counter(o.syncBytes, in, "in")
	counter(o.syncBytes, out, "out")
	sc := o.mp.rounds.Counters()
	counter(o.lookups, sc.LookupHits, "hit")
	counter(o.lookups, sc.LookupMisses, "miss")
	counter(o.lookupDials, sc.LookupDials)
	below, r := shardsBelowR(m.Placement())
	gauge(o.belowR, float64(below))
	gauge(o.replicate, float64(r))
	gauge(o.addrBook, float64(m.AddrBookLen()))
	counter(o.relayPushed, sc.RelayPushed)
	counter(o.handedOff, sc.HandedOff)
	gauge(o.syncPending, float64(o.mp.sync.Progress().Pending))
}

// shardsBelowR counts the shards that fewer than R storage nodes hold in
// pl, and returns R.
func shardsBelowR(pl placement.Placement) (below, r int) {
	r = pl.Replication()
	for s := range mesh.ShardCount {
		if len(pl.Holders(s)) < r {
			below++
		}
	}
	return below, r
}

// registerMetrics exports the mesh's NAT traversal state and counters.
func (mp *meshPart) registerMetrics(reg prometheus.Registerer) {
	m := mp.m
	counter := func(name, help string, f func(mesh.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: name, Help: help},
			func() float64 { return float64(f(m.Stats())) })
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: "reachability",
			Help: "Observed reachability: 0 unknown, 1 public, 2 private."},
			func() float64 { return float64(m.NATStatus().Reachability) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: "relay_service",
			Help: "1 while this node relays circuits for others."},
			func() float64 {
				if m.NATStatus().RelayService {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: "relay_reservations_held",
			Help: "Relays this node holds a reservation with."},
			func() float64 { return float64(len(m.NATStatus().Relays)) }),
		counter("reachability_changes_total", "Changes of the observed reachability.", func(s mesh.Stats) uint64 { return s.ReachabilityChanges }),
		counter("relay_reservations_total", "Reservations obtained from relays.", func(s mesh.Stats) uint64 { return s.RelayReservations }),
		counter("relay_reservations_served_total", "Reservations this node's relay service granted.", func(s mesh.Stats) uint64 { return s.RelayReservationsServed }),
		counter("relay_reservations_refused_total", "Reservations this node's relay service refused.", func(s mesh.Stats) uint64 { return s.RelayReservationsRefused }),
		counter("relay_circuits_total", "Circuits this node's relay service opened.", func(s mesh.Stats) uint64 { return s.RelayCircuits }),
		counter("relay_circuits_refused_total", "Circuits this node's relay service refused.", func(s mesh.Stats) uint64 { return s.RelayCircuitsRefused }),
		counter("relay_bytes_total", "Bytes this node's relay service relayed.", func(s mesh.Stats) uint64 { return s.RelayBytes }),
		counter("hole_punch_successes_total", "DCUtR hole punches that ended in a direct connection.", func(s mesh.Stats) uint64 { return s.HolePunchSuccesses }),
		counter("hole_punch_failures_total", "DCUtR hole punches that failed.", func(s mesh.Stats) uint64 { return s.HolePunchFailures }),
		counter("peers_banned_total", "Peers disconnected and refused for a while for misbehaviour (spec/limits.md).", func(s mesh.Stats) uint64 { return s.PeersBanned }),
		counter("banned_connections_refused_total", "Connections of banned peers refused right after their security handshake.", func(s mesh.Stats) uint64 { return s.BannedRefused }),
	)
	for _, reason := range []string{mesh.MisbehaviorInvalidGossip, mesh.MisbehaviorPEXViolation, mesh.MisbehaviorPEXFlood, mesh.MisbehaviorStreamsRefuse, mesh.MisbehaviorIrohRefused, mesh.MisbehaviorSyncViolation} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "fleetmesh", Subsystem: "mesh", Name: "misbehavior_total",
			Help: "Penalties given to peers for misbehaviour, by reason.", ConstLabels: prometheus.Labels{"reason": reason}},
			func() float64 { return float64(m.Stats().Misbehavior[reason]) }))
	}
}
