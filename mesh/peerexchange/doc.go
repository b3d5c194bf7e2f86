// Package peerexchange is fleetmesh's peer exchange: the stream protocol
// /fleetmesh/pex/2.0.0 by which nodes swap the signed node descriptors they
// have verified (spec/mesh-discovery.md, "Peer exchange"), the bounded
// table of descriptors a node keeps to pass on, and the spreading of news
// of newcomers so that a join reaches the whole mesh in a few hops.
//
// It runs on a libp2p host and reports to its owner, package mesh, only
// through Hooks: a goroutine runner, penalties for peers that break the
// protocol, each descriptor learnt, requests for a dial round and changes
// to the set of storage nodes. The owner asks it for what placement, relay
// candidates and operator counts need (StorageNodes, Relays, Class).
//
// It is not discovery (dialling, the address book, the DHT are package
// mesh's), not descriptor signing or checking (package descriptor does
// that, through the Verifier VerifyWith builds), and not placement
// (package mesh/placement).
//
// It is hand-written because libp2p has no standard protocol that
// carries signed application descriptors: GossipSub's PX carries only
// signed peer records, and only on PRUNE; identify carries only the
// connected peer's own addresses.
package peerexchange
