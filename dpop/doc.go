// Package dpop makes and checks DPoP proofs (RFC 9449, "OAuth 2.0
// Demonstrating Proof of Possession") for a did:key, so that an HTTP
// request, and the WebSocket opened by it, can be attributed to the DID
// that made it. A leaf signs one for each relay connection to its home
// nodes; the home's relay checks it at the upgrade and meters what it
// serves that connection as service given to that leaf (spec/leaf.md
// "Metering the relay connection").
//
// A proof is RFC 9449's unchanged: a JWT of type dpop+jwt, signed EdDSA
// (RFC 8037) with the Ed25519 key whose public JWK is in its header, with
// claims jti, htm, htu and iat, sent in the DPoP request header. The DID
// is did:key of that JWK's key, so a did:key holder needs nothing else to
// make one. What this package adds is the profile: no access token (the
// proof itself names the party), htu compared by host and path only (a
// TLS-terminating proxy may change the scheme, as for NIP-42's relay
// tag), and jti remembered per DID until the proof is too old to pass, so
// a captured proof cannot be replayed.
//
// Why not NIP-42: its AUTH is a Nostr event signed with a secp256k1 key,
// and a node's or a leaf's identity is an Ed25519 did:key; the two keys
// must never be the same or derived from each other. The signing and
// checking are go-jose's; the claim checks are written here because
// RFC 9449 proofs without an access token are not what OAuth libraries
// check.
//
// It is not an authorization scheme: a valid proof grants nothing, it
// only names who is asking. What a server does with the DID (meter it,
// refuse a DID it does not serve) is the caller's.
package dpop
