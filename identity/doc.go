// Package identity is a fleetmesh node's identity: one Ed25519 key and the
// three standard names it has.
//
//   - a W3C DID of the did:key method (did:key:z6Mk…), whose DID document
//     also carries the X25519 key-agreement key derived from the Ed25519 key,
//     as the did:key specification defines;
//   - a libp2p PeerID (12D3KooW…), the identity multihash of the same key;
//   - an iroh EndpointId, the same 32 public-key bytes.
//
// One key proves all three and no registry is ever consulted: every name is
// computed from the key. The package also parses these names back into the
// public key, so a peer's DID, PeerID and EndpointId can be checked against
// each other.
//
// It is not for Nostr user keys (secp256k1): a node key is never a user key
// and neither is derived from the other (docs/design.md §1). It is not a DID resolver
// for other methods, and it does no DIDComm: package didcomm builds on the
// keys it exposes.
//
// The key file is a PKCS#8 PEM block, so standard tools (openssl pkey) read
// it. It is written with mode 0600 and never overwritten.
package identity
