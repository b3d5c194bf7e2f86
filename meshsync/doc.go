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
// It meters what it moves for the node's accounting (Config.Meter: events
// and bytes each way, and storage bytes in a durable session) and asks the
// node's grants before it gives (Config.Allow): each event a REQ returns,
// each event pushed into a durable session. It also carries accounting
// records: a RECEIPTS frame asks for a page of a node's receipts and
// reports (Config.Receipts answers it, FetchReceipts asks), so they can be
// fetched from any node that holds them; the records and their checks are
// package accounting's.
//
// The Scheduler decides when to sync and with whom (spec/mesh-sync.md,
// spec/mesh-placement.md): a filter round with a random connected peer
// every interval, the anti-entropy of the durably held shards with chosen
// co-holders, the push of new events to peers reached only through a
// relay, and the stages of a REQ's lookup (peers asked first, then known
// peers dialled and content routing). A lookup waits for the slower peers
// only a grace after the first answer, and leaves peers that did not
// answer out of the next lookups (lookupsilence.go). It takes what it
// needs of the mesh through the Mesh interface. What a lookup finds is
// admitted and stored by the relay (relay/lookup.go), not here.
//
// It is not live propagation (GossipSub, package mesh), nor the durable
// placement rule (mesh/placement), nor the node's wiring: package node
// builds a Service and a Scheduler and runs the Scheduler.
package meshsync
