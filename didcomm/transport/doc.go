// Package transport carries packed DIDComm messages between nodes.
//
// HTTP (DIDComm Messaging v2 spec § "Transports", HTTPS): a message is
// POSTed with its media type as Content-Type
// (application/didcomm-encrypted+json, -signed+json or -plain+json). The
// answer, when the receiver has one for this connection (return_route),
// comes back in the response body with status 200; 202 means accepted with
// no answer. A refusal is a 4xx with a plaintext problem report as body.
//
// libp2p (new, fleetmesh's own): the stream protocol /fleetmesh/didcomm/1.0.0.
// Nodes already hold libp2p connections to each other (Noise-authenticated,
// hole-punched or relayed), and a leaf behind NAT has no HTTP endpoint at
// all, so DIDComm rides on a stream instead of opening another transport.
// No registered DIDComm binding for libp2p exists. On each stream the
// opener writes one frame, the packed message, and closes its write side;
// the other side answers with one frame (empty means accepted with no
// answer) and closes. A frame is an unsigned varint length (as libp2p's own
// protocols frame messages) followed by that many bytes; lengths over the
// named bound are refused before reading. spec/didcomm.md § Transports has
// the rules. The same framing runs over iroh (spec/iroh.md): Serve and
// Exchange take any Stream.
//
// It moves bytes; what they mean is didcomm/agent's business.
package transport
