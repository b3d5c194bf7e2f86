package mesh

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/nostr"
)

// Policy decides whether an event may be replicated. Every event the mesh
// publishes and every event it receives passes it; a refusal stops the event
// there (it is neither sent nor forwarded nor handed to the Sink) and is
// counted under reason. The boundary policy (custody material, credentials,
// billing) plugs in here. A Policy must be safe for concurrent use and fast:
// it runs inside GossipSub's validation pipeline.
type Policy func(ev *nostr.Event) (allowed bool, reason string)

// Sink receives the events the mesh replicates to this node, already
// verified and allowed by the Policy, from the peer that forwarded them. It
// is called from one goroutine per subscribed shard, so concurrently, and
// may see an event it already holds (the store deduplicates by id). An error
// is counted (Stats.SinkErrors); the event is not retried.
type Sink interface {
	Ingest(ctx context.Context, ev *nostr.Event, from peer.ID) error
}

// Direction says which way a refused event was going.
type Direction string

// The directions.
const (
	// Outbound is an event this node was asked to publish.
	Outbound Direction = "outbound"
	// Inbound is an event received from a peer.
	Inbound Direction = "inbound"
)

// ReasonOther is the reason under which refusals are counted once
// Config.MaxReasons distinct reasons have been seen.
const ReasonOther = "other"

// Reasons a message is invalid (Stats.Invalid). An invalid message costs the
// peer that forwarded it GossipSub score.
const (
	InvalidMalformed    = "malformed"
	InvalidNotCanonical = "not-canonical"
	InvalidTooLarge     = "too-large"
	InvalidBadSignature = "bad-signature"
	InvalidWrongShard   = "wrong-shard"
	InvalidEphemeral    = "ephemeral"
	InvalidBadTopic     = "bad-topic"
)

// Errors Publish returns (wrapped with detail).
var (
	// ErrRefused: the Policy refused the event.
	ErrRefused = errors.New("refused by replication policy")
	// ErrEphemeral: ephemeral events are never replicated.
	ErrEphemeral = errors.New("ephemeral events are not replicated")
	// ErrTooLarge: the event's JSON exceeds Config.MaxMessageBytes.
	ErrTooLarge = errors.New("event too large to replicate")
	// ErrClosed: the mesh was closed.
	ErrClosed = errors.New("mesh closed")
)

// Stats are the mesh's counters since it started. The node maps them to its
// metrics.
type Stats struct {
	// Published counts events this node published to the mesh.
	Published uint64
	// PublishedAlone counts events Publish accepted while no peer of their
	// shard was connected; anti-entropy carries them later.
	PublishedAlone uint64
	// Delivered counts events handed to the Sink.
	Delivered uint64
	// SinkErrors counts Sink.Ingest calls that returned an error.
	SinkErrors uint64
	// Refused counts Policy refusals per direction and reason.
	Refused map[Direction]map[string]uint64
	// Invalid counts received messages rejected as invalid, per reason.
	Invalid map[string]uint64
	// Misbehavior counts penalties given to peers, per reason
	// (Misbehavior* constants), and PeersBanned the peers disconnected
	// and refused for a while because their penalties added up
	// (spec/limits.md).
	Misbehavior map[string]uint64
	PeersBanned uint64
	// BannedRefused counts connections of banned peers refused right
	// after their security handshake (banGater).
	BannedRefused uint64
	// Dropped counts valid events GossipSub dropped because the Sink fell
	// more than Config.SubscriptionBuffer events behind.
	Dropped uint64
	// RPCBytesSent and RPCBytesReceived count GossipSub RPC bytes (messages
	// and control), before stream multiplexing and encryption.
	RPCBytesSent     uint64
	RPCBytesReceived uint64
	// MessagesReceived counts event messages in received GossipSub RPCs,
	// duplicates included: the messages the node had to handle.
	MessagesReceived uint64
	// IHaveReceived and IWantReceived count the message ids in received
	// IHAVE and IWANT gossip; GraftsReceived and PrunesReceived count
	// received GRAFT and PRUNE requests (mesh churn).
	IHaveReceived  uint64
	IWantReceived  uint64
	GraftsReceived uint64
	PrunesReceived uint64
	// DescriptorsAccepted and DescriptorsRejected count peer exchange
	// descriptors that verified and that did not.
	DescriptorsAccepted uint64
	DescriptorsRejected uint64
	// DescriptorsSent counts signed descriptors this node sent in peer
	// exchanges: only those a peer asked for by sum.
	DescriptorsSent uint64

	// NAT traversal (spec/mesh-nat.md).

	// ReachabilityChanges counts changes of the node's observed
	// reachability (Mesh.Reachability).
	ReachabilityChanges uint64
	// RelayReservations counts reservations this node obtained from
	// relays while privately reachable.
	RelayReservations uint64
	// RelayReservationsServed and RelayReservationsRefused count new
	// reservations this node's relay service granted and refused (a
	// renewal is not counted again).
	RelayReservationsServed  uint64
	RelayReservationsRefused uint64
	// RelayCircuits and RelayCircuitsRefused count circuits this node's
	// relay service opened and refused; RelayBytes the bytes it relayed.
	RelayCircuits        uint64
	RelayCircuitsRefused uint64
	RelayBytes           uint64
	// HolePunchSuccesses and HolePunchFailures count DCUtR hole punch
	// attempts, on either side, that did and did not end in a direct
	// connection.
	HolePunchSuccesses uint64
	HolePunchFailures  uint64

	// DurableShards are the shards this node holds for durability, in
	// increasing order (spec/mesh-placement.md).
	DurableShards []int
	// StorageNodes is how many storage nodes the placement is computed
	// over, this node included if it offers storage.
	StorageNodes int
	// PlacementChanges counts recomputations that changed the placement.
	PlacementChanges uint64
	// HoldersDown counts storage nodes judged down by liveness probes and
	// left out of the placement until they connect again.
	HoldersDown uint64

	// ProvideQueued counts event CIDs queued for a DHT announcement;
	// ProvideDropped those refused because the queue was full. Provided
	// and ProvideFailed count announcements that completed and failed.
	ProvideQueued  uint64
	ProvideDropped uint64
	Provided       uint64
	ProvideFailed  uint64
	// ProviderLookups counts DHT searches for the providers of an event
	// CID; ProvidersFound the providers they returned.
	ProviderLookups uint64
	ProvidersFound  uint64
}

// counters holds Stats behind a mutex; the maps of reasons are bounded.
type counters struct {
	maxReasons int

	mu sync.Mutex
	s  Stats
}

func newCounters(maxReasons int) *counters {
	return &counters{maxReasons: maxReasons, s: Stats{
		Refused:     map[Direction]map[string]uint64{Inbound: {}, Outbound: {}},
		Invalid:     map[string]uint64{},
		Misbehavior: map[string]uint64{},
	}}
}

func (c *counters) add(f func(s *Stats)) {
	c.mu.Lock()
	f(&c.s)
	c.mu.Unlock()
}

func (c *counters) refused(dir Direction, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.s.Refused[dir]
	if _, ok := m[reason]; !ok && len(m) >= c.maxReasons {
		reason = ReasonOther
	}
	m[reason]++
}

func (c *counters) invalid(reason string) {
	c.add(func(s *Stats) { s.Invalid[reason]++ })
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.s
	out.Refused = map[Direction]map[string]uint64{}
	for d, m := range c.s.Refused {
		out.Refused[d] = make(map[string]uint64, len(m))
		for k, v := range m {
			out.Refused[d][k] = v
		}
	}
	out.DurableShards = slices.Clone(c.s.DurableShards)
	out.Invalid = make(map[string]uint64, len(c.s.Invalid))
	for k, v := range c.s.Invalid {
		out.Invalid[k] = v
	}
	out.Misbehavior = make(map[string]uint64, len(c.s.Misbehavior))
	for k, v := range c.s.Misbehavior {
		out.Misbehavior[k] = v
	}
	return out
}
