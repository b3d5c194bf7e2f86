// Package didcomm packs and unpacks DIDComm Messaging v2 envelopes: plaintext
// (application/didcomm-plain+json), signed (application/didcomm-signed+json,
// JWS General JSON with EdDSA) and encrypted (application/didcomm-encrypted+json,
// JWE General JSON): anoncrypt with ECDH-ES+A256KW and authcrypt with
// ECDH-1PU+A256KW, as the DIF DIDComm Messaging v2 specification
// (https://identity.foundation/didcomm-messaging/spec/v2.1/, sections
// "Message Formats" and "Cryptographic Algorithms") defines them.
//
// Content encryption: A256CBC-HS512 (required, and the only one authcrypt
// allows), A256GCM and XC20P (XChaCha20-Poly1305) for anoncrypt. Curves:
// X25519 (what a fleetmesh did:key node uses), P-256 and P-384.
//
// What is a library and what is written here, and why: go-jose v4 does the
// JWS (EdDSA signing and verification) and supplies the primitives it
// exports for JWE (Concat KDF, AES key wrap, AES-CBC-HMAC). No Go library
// does the rest: go-jose has no ECDH-1PU and no X25519 ECDH-ES, and jwx makes
// one ephemeral key per recipient, which breaks DIDComm's single shared
// `epk`. So the JWE layer (key agreement with crypto/ecdh, the header rules:
// one shared epk, apu = skid, apv = SHA-256 of the sorted recipient kids,
// AAD = the base64url protected header, and ECDH-1PU with the content tag
// in the key-wrap KDF per draft-madden-jose-ecdh-1pu-04) is written here and
// checked against that draft's Appendix B vector and the DIDComm spec's
// appendix vectors.
//
// Unpack enforces the receiver rules: the plaintext `from` must be the DID
// of the authcrypt sender key (`skid`) and of every signer; `to` must name
// the recipient when present; expired or future-dated messages and replays
// (message id seen before, see ReplayGuard) are refused; input larger than
// a named bound is refused before parsing. Every refusal is a *Problem
// carrying the report-problem 2.0 code the receiver should answer with.
//
// It is not a transport (see didcomm/transport), not a protocol engine (see
// didcomm/agent and the protocol packages beside it), and it resolves only
// did:key DIDs itself (StaticResolver serves fixed key sets, e.g. test
// vectors). The wire rules fleetmesh follows are in spec/didcomm.md.
package didcomm
