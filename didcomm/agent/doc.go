// Package agent is a fleetmesh node's DIDComm endpoint: the Service the
// node mounts at /didcomm on its HTTP port and on the libp2p stream
// protocol /fleetmesh/didcomm/1.0.0. It unpacks each message (with replay
// protection), dispatches it by type and answers on the same connection:
//
//   - trust-ping 2.0: answers pings;
//   - discover-features 2.0: discloses every protocol it speaks;
//   - coordinate-mediation 3.0, message pickup 3.0 and routing 2.0
//     forward: mediates for any leaf that asks, with the queue persisted
//     under the directory it is given (didcomm/mediator);
//   - report-problem 2.0: every message it cannot read or will not handle
//     (malformed, unknown type, sender key mismatch, replay, expired, too
//     big) is answered with a problem report carrying the code, never
//     dropped silently.
//
// A GET on the HTTP endpoint returns the node's out-of-band invitation, so
// a phone that scanned the anchor's QR code, or was given its URL, learns
// its DID.
//
// fleetmesh's own protocols (under https://fleetmesh.org/protocols/) are
// implemented elsewhere and registered with Register (package accounting
// registers grant, receipt, dispute and report); Request sends a message
// to another node and returns its answer.
//
// It is not the envelope code (package didcomm) nor the transports
// (didcomm/transport), and it holds no fleetmesh-specific protocol logic.
// spec/didcomm.md describes the wire.
package agent
