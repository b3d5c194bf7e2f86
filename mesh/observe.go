package mesh

import (
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// PeerKind is what an operator counts connected peers by: the class their
// descriptor declares ("unknown" without one) and the transport of their
// best connection ("tcp", "quic", "ws", "webtransport", "webrtc", "relay"
// for a circuit, "other").
type PeerKind struct {
	Class, Transport string
}

// PeerCounts counts the connected peers by kind. A peer with several
// connections counts once, by a direct connection if it has one.
func (m *Mesh) PeerCounts() map[PeerKind]int {
	out := map[PeerKind]int{}
	for _, id := range m.h.Network().Peers() {
		transport := ""
		for _, c := range m.h.Network().ConnsToPeer(id) {
			t := transportOf(c.RemoteMultiaddr())
			if transport == "" || transport == "relay" {
				transport = t
			}
		}
		if transport == "" {
			continue
		}
		class := ""
		if m.pex != nil {
			class = m.pex.Class(id)
		}
		if class == "" {
			class = "unknown"
		}
		out[PeerKind{Class: class, Transport: transport}]++
	}
	return out
}

// transportOf names the transport of a connection's remote address.
func transportOf(a ma.Multiaddr) string {
	has := func(code int) bool {
		_, err := a.ValueForProtocol(code)
		return err == nil
	}
	switch {
	case has(ma.P_CIRCUIT):
		return "relay"
	case has(ma.P_WEBTRANSPORT):
		return "webtransport"
	case has(ma.P_WEBRTC_DIRECT), has(ma.P_WEBRTC):
		return "webrtc"
	case has(ma.P_QUIC_V1), has(ma.P_QUIC):
		return "quic"
	case has(ma.P_WS), has(ma.P_WSS):
		return "ws"
	case has(ma.P_TCP):
		return "tcp"
	default:
		return "other"
	}
}

// ProtocolBytes returns the bytes received and sent on streams of p since
// the mesh started, on a host made by Open (zero on others).
func (m *Mesh) ProtocolBytes(p protocol.ID) (in, out uint64) {
	if m.bw == nil {
		return 0, 0
	}
	st := m.bw.GetBandwidthForProtocol(p)
	return uint64(st.TotalIn), uint64(st.TotalOut)
}
