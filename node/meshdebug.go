package node

import (
	"encoding/json"
	"net/http"
	"strings"

	ma "github.com/multiformats/go-multiaddr"
)

// MeshDebug is what /debug/mesh serves: the node's NAT status and its
// connections, so an operator (or a test) can see whether a peer is
// reached directly or through a relay.
type MeshDebug struct {
	PeerID       string            `json:"peer_id"`
	Class        string            `json:"class"`
	ClassConfig  string            `json:"class_config"`
	Reachability string            `json:"reachability"`
	RelayService bool              `json:"relay_service"`
	Relays       []string          `json:"relays"`
	Addrs        []string          `json:"addrs"`
	Connections  []MeshConnection  `json:"connections"`
	Stats        map[string]uint64 `json:"stats"`
}

// MeshConnection is one open libp2p connection.
type MeshConnection struct {
	Peer      string `json:"peer"`
	Addr      string `json:"addr"`
	Direction string `json:"direction"`
	// Relayed is set for a connection through a circuit relay
	// (/p2p-circuit); a hole-punched or dialled connection is direct.
	Relayed bool `json:"relayed"`
	// Limited is set when the relay limits the connection's duration and
	// data (circuit relay v2 limits).
	Limited bool `json:"limited"`
}

func (mp *meshPart) debug() MeshDebug {
	h := mp.m.Host()
	st := mp.m.NATStatus()
	stats := mp.m.Stats()
	d := MeshDebug{
		PeerID:       h.ID().String(),
		Class:        string(mp.self.class(st)),
		ClassConfig:  mp.self.cfg.Class,
		Reachability: strings.ToLower(st.Reachability.String()),
		RelayService: st.RelayService,
		Relays:       []string{},
		Addrs:        mp.addrs(),
		Connections:  []MeshConnection{},
		Stats: map[string]uint64{
			"reachability_changes":       stats.ReachabilityChanges,
			"relay_reservations":         stats.RelayReservations,
			"relay_reservations_served":  stats.RelayReservationsServed,
			"relay_reservations_refused": stats.RelayReservationsRefused,
			"relay_circuits":             stats.RelayCircuits,
			"relay_circuits_refused":     stats.RelayCircuitsRefused,
			"relay_bytes":                stats.RelayBytes,
			"hole_punch_successes":       stats.HolePunchSuccesses,
			"hole_punch_failures":        stats.HolePunchFailures,
		},
	}
	for _, r := range st.Relays {
		d.Relays = append(d.Relays, r.String())
	}
	for _, c := range h.Network().Conns() {
		_, circuitErr := c.RemoteMultiaddr().ValueForProtocol(ma.P_CIRCUIT)
		d.Connections = append(d.Connections, MeshConnection{
			Peer:      c.RemotePeer().String(),
			Addr:      c.RemoteMultiaddr().String(),
			Direction: strings.ToLower(c.Stat().Direction.String()),
			Relayed:   circuitErr == nil,
			Limited:   c.Stat().Limited,
		})
	}
	return d
}

func (mp *meshPart) serveDebug(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(mp.debug())
}
