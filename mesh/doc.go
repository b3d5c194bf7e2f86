// Package mesh is a fleetmesh node's part of the mesh: its libp2p host (on
// the node's own Ed25519 key, so PeerID and DID name one key), discovery of
// other nodes with no hardwired host, and live replication of Nostr events
// between nodes over GossipSub.
//
// Discovery: bootstrap peers come only from Config (this code names none);
// mDNS on a LAN when enabled; a Kademlia DHT under the protocol prefix
// /fleetmesh, which is also how GossipSub finds the other subscribers of a
// shard; peer exchange of signed node descriptors (package
// mesh/peerexchange); and an address book (package mesh/addrbook)
// persisted in the node home, so that a restarted node reconnects with no
// bootstrap at all. spec/mesh-discovery.md
// specifies peer exchange and the address book.
//
// NAT traversal (spec/mesh-nat.md): go-libp2p's AutoNAT v1 and v2, circuit
// relay v2, AutoRelay and DCUtR, with fleetmesh's rules on top: one
// reachability from both AutoNATs (Mesh.NATStatus, Hooks.OnNATChange),
// a relay service with limits that follows it (Config.RelayService,
// Config.RelayLimits), and relay candidates taken from configured static
// relays and from verified descriptors of anchors and relay offers, never a
// built-in host. UPnP/NAT-PMP port mapping is off unless configured.
//
// Replication: events travel on GossipSub topics sharded by author
// (spec/mesh-topics.md), so a node's traffic grows with the shards it
// subscribes to, not with all traffic in the mesh. Every message is one
// event's canonical NIP-01 JSON; a validator rejects what is malformed, not
// canonical, on the wrong shard, ephemeral or badly signed, and drops what
// the node's replication Policy refuses. Every event published passes the
// same Policy first. Refusals are counted (Stats). Received events go to the
// node's Sink.
//
// Durability (spec/mesh-placement.md): from the verified descriptors of
// storage nodes, the mesh places every shard on R of them by rendezvous
// hashing (the rule is package mesh/placement), subscribes to the shards
// it holds besides those the node asked for, and announces in the DHT
// the CIDs of the events the node stores in them (ProvideEvent, through a
// bounded, rate-limited queue); FindProviders finds the holders of an
// event by its id. The placement rule is fleetmesh's own; provider
// records are the DHT's.
//
// What is hand-written here and why: the topic scheme, the validator and the
// score parameters are fleetmesh's own rules on top of go-libp2p-pubsub; the
// peer exchange protocol is new (package mesh/peerexchange says why); the
// address book because go-libp2p's peerstore is not persisted; the NAT
// rules because go-libp2p decides reachability, relaying and relay
// candidates only for a whole host, without knowing fleetmesh's
// descriptors. Transport, security,
// muxing, resource limits, the DHT, mDNS, GossipSub, AutoNAT, the relay and
// hole punching themselves are go-libp2p's.
//
// It is not the event store, the relay, or anti-entropy: it does not keep
// events, answer REQs or reconcile sets. Those build on it (the store is the
// Sink; anti-entropy runs over its own stream protocol on this host, and
// the node decides with whom, from the Placement). It does not decide what
// may cross the boundary: the Policy does, nor which class a node declares:
// the node does, from NATStatus.
package mesh
