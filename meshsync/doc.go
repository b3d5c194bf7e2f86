// Package meshsync makes two fleetmesh nodes that were apart converge:
// they reconcile the sets of events they hold for a filter with negentropy
// (NIP-77's protocol), then each fetches what it lacks and pushes what the
// other lacks. Deletions and replaced events converge too, because NIP-09
// deletion requests and newer versions are ordinary events that the store
// applies on arrival.
//
// The wire is NIP-01 and NIP-77's own message shapes (NEG-OPEN, NEG-MSG,
// NEG-ERR, NEG-CLOSE, REQ by ids, EVENT, EOSE, OK) carried over a libp2p
// stream of length-prefixed JSON frames instead of a WebSocket: the shapes
// are standard, the binding is new (spec/mesh-sync.md says why).
//
// Every event that leaves or enters through this package passes the
// boundary policy (directions replicate_out and replicate_in) and is
// verified before it is stored.
//
// A session may be restricted to author shards (SyncShards, the NEG-OPEN
// shard option, which is new): the anti-entropy of the shards a node holds
// for durability (spec/mesh-placement.md), whose authors no filter can
// list.
//
// It is not live propagation (GossipSub, package mesh) and it does not
// decide when to sync or with whom: the node calls SyncWith and
// SyncShards on a timer, with peers it picks.
package meshsync
