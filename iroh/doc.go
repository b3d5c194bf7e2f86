// Package iroh is a fleetmesh node's iroh endpoint: the second transport
// the seed names, beside libp2p (spec/iroh.md). Its EndpointId is the
// node's own Ed25519 key, the one `fleetmesh id` prints as endpoint_id,
// and it carries the same node-to-node protocols as libp2p, one ALPN per
// protocol.
//
// # Why a helper process
//
// iroh 1.x authenticates its QUIC connections with TLS 1.3 raw public keys
// (RFC 7250). There is no Go iroh module, and Go's crypto/tls, which
// quic-go drives, has no raw-public-key support and no hook to add it; a
// Go implementation would mean a hand-written TLS 1.3 handshake plus
// iroh's path selection, hole punching and relay client, none of which
// may be copied from iroh. So the node runs the official binding instead:
// it starts and supervises a small Node.js script (iroh/helper/helper.mjs,
// with its own package.json and lock file, installed with `npm install
// --no-save`, which takes every version from the lock) that
// holds an @number0/iroh Endpoint, and speaks to it over a Unix socket in
// the node home. Interop with real iroh endpoints is then iroh's own
// code, not a look-alike.
//
// The trade-offs, which spec/iroh.md details:
//
//   - What an operator installs: Node.js 20.3 or later and the helper
//     directory with its modules ([iroh] helper_dir; the release archives
//     and the container image carry it beside the executable). The
//     binding has native builds for linux-x64 and darwin-arm64 only.
//     Check runs the helper's own `--check`, which loads the binding;
//     without it the node runs on libp2p alone and says why iroh is off
//     (ErrUnavailable).
//   - Crashes: the helper is supervised. When it exits or its control
//     channel breaks (kill -9 included), dials in flight fail with ErrDown,
//     its connections are gone, and it is started again with backoff
//     (250 ms doubling to 10 s). A helper that cannot start at all (it
//     exits before it serves, maxStartFailures times in a row) is given up
//     on with one ERROR naming its cause (Failed) until the node restarts.
//     It has no state of its own, so the new
//     helper is the same endpoint; peers reconnect on their next dial.
//     Streams do not survive a restart; the protocols above (sync, lookups,
//     DIDComm) are request/response sessions that the node retries, and
//     nothing acknowledged lives in the helper.
//   - The key: the helper receives the 32-byte seed on the control channel
//     of the socket, which lives in a 0700 directory with mode 0600 and
//     accepts only connections presenting a random token given to the
//     child in its environment. The key is never written anywhere else.
//   - Cost: one Node.js process (tens of MiB) and a copy of every stream
//     byte through the socket; docs/benchmarks/iroh.md measures it.
//
// Each iroh bi-stream is one connection to the socket, so a Stream is a
// Unix socket with deadlines and half-close, and no multiplexer is
// hand-written here. The price is a file descriptor per stream, so Limits
// bound the streams (in all: the node's file budget share; and per remote
// endpoint and ALPN) and the inbound connections, in the helper as they
// arrive and again here; refusals are reported (Config.OnRefused) for the
// node to score the remote down, and Ban shuts a remote out. The
// socket's protocol (JSON lines, then raw bytes) is fleetmesh's own and
// is in spec/iroh.md.
//
// It is not a relay server (package iroh/relay is, on anchors), it does
// not decide which transport reaches a peer (the
// node does, node/iroh.go), and it keeps no address book: addresses come
// from descriptors and config.
package iroh
