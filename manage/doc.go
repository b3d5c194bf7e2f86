// Package manage is the operator's own moderation of a node's relay: the
// pubkeys, events and kinds it bans or allows and the client addresses it
// blocks, kept durably (a ListStore: manage.db in the node's home, or, for
// a node served by several front-ends, its PostgreSQL database), enforced
// through the relay's hooks, and changed at run time through the NIP-86 relay
// management API (JSON-RPC by HTTP POST to the relay URL with
// Content-Type application/nostr+json+rpc), authorized by NIP-98 HTTP auth
// with the payload hash required. Existing relay admin tools speak that
// API, so an operator keeps the tool they use.
//
// Only the Nostr keys listed in [manage] admins may call it: a missing,
// malformed, stale, replayed or mis-addressed authorization is answered
// 401, a well-formed one from a key not listed 403 (spec/limits.md gives
// the bounds).
//
// What the lists mean (docs/operators.md, "Moderating your relay"):
//   - a banned pubkey's or event's events are refused whatever way they
//     come (a client, a sync, GossipSub, a lookup), with OK false and a
//     "blocked:" reason, and a banned event is removed from the store;
//   - the allowed pubkeys and kinds, when not empty, are the only ones the
//     node's own clients may publish; the mesh's own traffic is not held
//     to them, so an operator who allows one kind does not cut the node
//     off from its peers' descriptors and receipts;
//   - a blocked address's WebSocket upgrades are refused with 403 and its
//     open connections are closed.
//
// The relay's checks read an in-memory view of the lists, never the store:
// one check per event and per connection cannot afford a database round
// trip. A store that other front-ends change too is watched (woken by its
// notification, read every ListOptions.Poll besides), so a ban made
// through one front-end holds at the others within a poll at worst, and
// its effects happen at each: a newly blocked prefix's clients are closed
// by every front-end, the NIP-11 fields shown by every front-end; a banned
// event is removed once, from the store they share.
//
// It is not the shared, standing-weighted policy built from labels that
// other nodes publish (package label): these are the operator's decrees
// at their own node, and they never leave it. Bans are not replicated
// over the mesh.
//
// Hand-written: the JSON-RPC envelope and the NIP-98 checks are a few
// dozen lines over package nostr's event type; go-nostr's nip86 carries
// its own event type and would put a second Nostr implementation in the
// binary.
package manage
