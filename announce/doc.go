// Package announce publishes a node's signed descriptor as a Nostr event
// to ordinary relays its operator names, and finds mesh peers from such
// events on any relay, so that a Nostr relay a newcomer already uses is a
// way into the mesh (`fleetmesh run --join wss://…`). No relay is built in.
//
// It implements spec/announce.md, in the manner of NIP-66 relay discovery:
// an addressable event (NIP-01, kind 30000–39999) of kind Kind with a `d`
// tag, so that a relay keeps one current announcement per node, and a
// NIP-40 `expiration` tag equal to the descriptor's, so that relays drop it
// when it stops being valid. The event is signed by a secp256k1
// announcement key kept in the node home (KeyFile, mode 0600), never by
// the node key, which is Ed25519 and no Nostr key. What binds the event to
// the node is its content: the node's Ed25519-signed descriptor (package
// descriptor, spec/descriptor.md). A reader trusts nothing of the event
// but what that descriptor says, and verifies it (signature, rules,
// expiry) before it dials any address in it.
//
// A relay's answer is untrusted in quantity too: Find walks back past a
// flood of newer announcements within a bounded number of pages, and Pick
// dials a bounded number of nodes, one per announcement key, known ones
// first, in random order (spec/announce.md "What a relay, or a flood of
// it, can do").
//
// It holds its own small NIP-01 client (publish one event and wait for OK;
// one REQ until EOSE) on nostr's message codec: package conformance's and
// package leaf's are shaped for their checks and wakes and are not
// exported, and this one needs no more than those two exchanges, each
// bounded in time, size and count.
//
// It is not a trust decision (a valid descriptor proves only that its key
// made it) and not a relay: it only talks to relays as a client.
package announce
