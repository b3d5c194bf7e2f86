// Package negentropy implements the negentropy set-reconciliation protocol,
// version 1, exactly as NIP-77 carries it: the binary message codec and the
// two roles (initiator and responder) over a sorted Storage of
// (timestamp, id) items.
//
// Two peers that each hold a set of 32-byte ids ordered by (timestamp, id)
// exchange messages of ranges. A range is answered with a 16-byte
// fingerprint, split into buckets when the fingerprints differ, and listed id
// by id once it is small. After a few round trips the initiator knows which
// ids it has that the responder lacks (have) and which it lacks (need); the
// bytes spent grow with the number of differences, not with the set size.
// The wire format is specified in spec/negentropy.md (a standard, not
// fleetmesh's own: hoytech's Negentropy Protocol V1, the appendix of NIP-77).
//
// What this package is not for: it knows nothing about relays, WebSockets,
// filters, hex or NEG-OPEN/NEG-MSG/NEG-CLOSE/NEG-ERR framing, nor about
// libp2p streams; the relay and the mesh wrap it. It does not move events,
// only ids: what a peer does with have and need is the caller's business.
//
// Why hand-written: the Go code of the field is go-nostr's nip77/negentropy,
// which lives inside the whole go-nostr module, keys items by hex strings,
// panics on storage errors and reports differences through channels sized by
// the set, so it gives neither a storage interface an on-disk store can
// answer with errors nor bounded, deduplicated initiator results. The
// protocol is small (a varint codec, a 256-bit sum and SHA-256), so
// fleetmesh writes it and proves it against an implementation nobody here
// wrote (@nostr-dev-kit/sync) in interop tests.
package negentropy
