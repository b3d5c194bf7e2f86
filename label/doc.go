// Package label is the mesh's shared threat intelligence
// (docs/design.md §7; spec/labels.md): nodes publish signed labels, in
// the form of NIP-32 label events (kind 1985) with NIP-56's report types
// as the vocabulary, naming an author, an event, a blob or a node; every
// node keeps the labels it receives within bounds (Set) and weighs each
// by its labeller's standing from its own point of view before its own
// policy (Policy) counts, holds or refuses what they name.
//
// A label is signed twice: the Nostr event by the node's secp256k1 label
// key (relays and clients need a NIP-01 signature), and its content by
// the node's own Ed25519 key, carried in a `did` tag, which is what
// makes the node the labeller (spec/labels.md "Signatures"). Standing
// reads the node key's DID; a Nostr key alone has none.
//
// What is hand-written and why: the label's tags and checks are this
// project's profile of NIP-32, which no Go library implements; the
// index is a few maps, bounded per labeller and in total, so that a
// flood of labels costs bounded memory.
//
// It is not the relay's operator bans (the NIP-86 management API), nor
// standing itself (package standing), which it reads through
// standing.Reader; it never decides anything about a node from a label
// alone: a label about a node counts only with an unresolved dispute
// signed by its labeller behind it.
package label
