// Package nostr holds the Nostr data model that a fleetmesh relay speaks to
// its clients: events (NIP-01), their canonical serialization, id and BIP-340
// Schnorr signature, filters and their matching rules, kind classes, and the
// one codec for the messages of both directions: client to relay (EVENT,
// REQ, CLOSE, COUNT, AUTH, NEG-*; ClientMessage) and relay to client
// (EVENT, OK, EOSE, CLOSED, NOTICE, AUTH, COUNT, NEG-MSG, NEG-ERR;
// RelayMessage), each parsed by one function and encoded by AppendJSON.
//
// It is not a relay and not a client: it has no sockets, no storage and no
// policy. Package relay uses it to serve clients; the gateway, the leaf and
// the conformance suite use it to talk to relays; package store uses it to
// index events.
//
// The canonical serialization is written here because it is the one part
// every library gets subtly different (NIP-01 fixes exactly which characters
// are escaped, which encoding/json does not honour). Schnorr verification is
// btcec/v2's algorithm on btcec/v2's curve operations; it is composed here
// only so that an author's key is lifted onto the curve once (btcec's
// Verify lifts it on every call) and can be kept by a Verifier. For a key
// a Verifier keeps, the multiplication by the key is done from a table of
// its precomputed multiples instead of btcec's ScalarMultNonConst
// (keytable.go): no Go library keeps per-key precomputation for
// verification, and that multiplication is three quarters of a check. It
// is built of btcec's own point operations and held to btcec's results by
// its tests.
//
// Built with the libsecp256k1 tag (and cgo), verification calls
// libsecp256k1 instead, Bitcoin Core's library and the reference
// implementation of BIP-340, linked from the system (Debian's
// libsecp256k1-dev, 0.2 or later, with its schnorrsig module). It is the
// faster of the two (docs/benchmarks/relay.md has the figures), and
// signature checks are most of a relay's ingest work; the pure-Go path
// stays the default so that a plain `go build` needs no C library. Backend
// says which one a binary has; the tests hold both to BIP-340's vectors and
// to each other.
//
// Client messages are decoded with encoding/json, except that the usual
// shape of an EVENT message, most of what a relay reads, takes a one-pass
// shortcut (fastevent.go) that gives up on anything unusual; a fuzz test
// holds it to producing exactly what the encoding/json path produces. No
// JSON library offers "decode this one shape, else tell me to fall back"
// with encoding/json's exact acceptance rules, which is why it is ours.
package nostr
