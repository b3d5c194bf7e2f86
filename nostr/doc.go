// Package nostr holds the Nostr data model that a fleetmesh relay speaks to
// its clients: events (NIP-01), their canonical serialization, id and BIP-340
// Schnorr signature, filters and their matching rules, kind classes, and the
// client-to-relay messages (EVENT, REQ, CLOSE, COUNT, AUTH, NEG-*).
//
// It is not a relay and not a client: it has no sockets, no storage and no
// policy. Package relay uses it to serve clients; package store uses it to
// index events.
//
// The canonical serialization is written here because it is the one part
// every library gets subtly different (NIP-01 fixes exactly which characters
// are escaped, which encoding/json does not honour). Schnorr verification is
// btcec/v2's.
package nostr
