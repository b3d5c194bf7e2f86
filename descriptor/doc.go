// Package descriptor is the signed node descriptor: the statement in which a
// fleetmesh node declares who it is (its did:key DID), which class it runs
// as (anchor, home or leaf), where it can be reached (libp2p multiaddrs,
// Nostr relay URLs, its iroh endpoint), which protocols it speaks, what it
// offers others (storage, circuit relay, DIDComm mediation, compute, each
// with bounds), and for how long the statement holds (a sequence number,
// issued-at and expiry).
//
// It implements spec/descriptor.md. The payload is a new wire format (no
// standard carries class, offers and a sequence number together; the spec
// page says why), wrapped in a standard envelope: a JWS (RFC 7515) in compact
// serialization, alg EdDSA, signed by the node's Ed25519 key, with `kid` the
// DID's verification-method id and `typ` naming the format. Every signed
// descriptor also has a CIDv1 (raw codec, sha2-256 of the compact JWS) so it
// can be addressed by content like every other signed object in the mesh.
//
// go-jose does the JWS; go-multiaddr, go-cid and go-multihash do their
// formats. What is written here by hand is only what is specific to
// fleetmesh: the payload schema and its rules, and the replay cache
// (Verifier), which remembers the highest sequence number seen per DID in a
// bounded table.
//
// It is not for deciding whether to trust a node: a valid descriptor proves
// only that the DID's key made the claim. Declaring `anchor` is a claim;
// standing is earned elsewhere (package standing). It does no networking:
// publishing and fetching descriptors belong to the mesh.
package descriptor
