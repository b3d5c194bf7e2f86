// Package placement is fleetmesh's durability placement rule
// (spec/mesh-placement.md, "The rule"): which storage nodes hold which
// author shard. It is rendezvous (highest-random-weight) hashing of the
// shards over the nodes' Ed25519 public keys, so that every node computes
// the same placement alone from the storage nodes it knows, with no
// coordinator.
//
// It is pure: a function of a replication factor, a shard count and a set
// of PeerIDs, with no host, network or clock. It is not the upkeep of a
// node's placement (package mesh recomputes it as descriptors come and
// go, and subscribes to the shards the node holds), nor the choice of
// whom to sync with (package node plans that from a Placement).
//
// It is hand-written because the rule is fleetmesh's own; it is small.
package placement
