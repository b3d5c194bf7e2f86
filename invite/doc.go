// Package invite is the join code `fleetmesh invite` prints and
// `fleetmesh run --join CODE` reads: a short, signed, expiring statement of
// where one node's mesh can be reached, small enough to read aloud, paste
// into a chat or scan as a QR code.
//
// It implements spec/invite.md. The code is a NIP-19-style bech32 string
// (BIP-173 checksum, no length limit, as nprofile and nevent use) of a
// type-length-value list: the node's Ed25519 public key, its multiaddrs in
// their binary multiformats encoding without the trailing /p2p/ (the key
// names the peer), an expiry, and an Ed25519 signature by the same key over
// everything before it. A code whose bytes were changed, whose signature is
// by another key, or whose expiry has passed is refused. The link form is
// the code behind a `fleetmesh:` URI scheme, as NIP-21 puts NIP-19 codes
// behind `nostr:`.
//
// btcutil's bech32 does the bech32 and go-multiaddr the multiaddrs; only
// the TLV layout and its rules are written here, since no existing format
// carries a signed, expiring list of multiaddrs this compactly (the spec
// page compares DIDComm out-of-band invitations and libp2p signed peer
// records).
//
// It is not a trust decision: a valid code proves only that the key made
// it. It does no networking; the node bootstraps from the addresses.
package invite
