// Package relay is an iroh relay server: what lets a fleetmesh anchor serve
// as the relay of iroh endpoints (fleetmesh nodes' helpers and any other
// iroh 1.x endpoint) that cannot reach each other directly. It implements
// the relay protocol of iroh-relay (versions iroh-relay-v2 and
// iroh-relay-v1) as spec/iroh.md ("Anchors as iroh relays") describes it:
// the WebSocket upgrade at /relay, the handshake that authenticates a
// client by its EndpointId (a signed challenge, or a signature over TLS
// keying material in the X-Iroh-Relay-Client-Auth-V1 header), the frames
// that carry QUIC datagrams between endpoints, and the /ping and
// /generate_204 probes iroh clients use.
//
// Why hand-written: there is no Go iroh module and no Go implementation of
// this protocol to depend on; it was written here from iroh's own
// description of its protocol (frame types, postcard payloads), not
// copied. The WebSocket layer is gorilla/websocket, BLAKE3 is
// lukechampine.com/blake3, rate limits golang.org/x/time/rate.
//
// It is not an iroh endpoint (package iroh is), it keeps nothing on disk,
// and it is not the QUIC address discovery service iroh relays may run
// on UDP port 7842 (not served here: iroh clients fall back to their
// other probes). The node mounts it on an anchor's HTTP port (node
// package); limits come from [iroh] relay_* config values.
package relay
