package mesh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/proto"

	"fleetmesh.org/fleetmesh/nostr"
)

// messageID names a GossipSub message by the SHA-256 of its data. Messages
// carry no author and no signature (the event inside is signed by its
// author), and the data must be the event's canonical JSON, so one event has
// one message id wherever it is published.
func messageID(m *pb.Message) string {
	h := sha256.Sum256(m.GetData())
	return string(h[:])
}

// peerOutboundQueue bounds the RPCs queued for one peer. GossipSub
// announces each subscription change in an RPC of its own and, when the
// queue is full, drops the announcement and retries it up to a second
// later; a node that joins or leaves every shard at once (a filter with no
// authors, or its durability share moving) must fit, or its subscriptions
// trickle out over many seconds of retries. Its default is 32.
const peerOutboundQueue = 2*ShardCount + 64

// Peer score thresholds (spec/mesh-topics.md, "Peer scoring"). A peer whose
// score falls below gossipThreshold gets no gossip from us, below
// publishThreshold none of our own messages, below graylistThreshold we
// ignore it altogether. The gaps are wide enough that one or two invalid
// messages (weight invalidWeight each, squared) push a peer past gossip but
// a sustained stream is needed to graylist it.
const (
	gossipThreshold             = -100
	publishThreshold            = -200
	graylistThreshold           = -400
	acceptPXThreshold           = 10
	opportunisticGraftThreshold = 2
	invalidWeight               = -50
	topicScoreCap               = 50
)

func peerScoreThresholds() *pubsub.PeerScoreThresholds {
	return &pubsub.PeerScoreThresholds{
		GossipThreshold:             gossipThreshold,
		PublishThreshold:            publishThreshold,
		GraylistThreshold:           graylistThreshold,
		AcceptPXThreshold:           acceptPXThreshold,
		OpportunisticGraftThreshold: opportunisticGraftThreshold,
	}
}

// loopbackNets are exempt from the IP colocation penalty: many nodes on one
// machine is how tests and local development run, never how strangers
// attack.
func loopbackNets() []*net.IPNet {
	_, v4, _ := net.ParseCIDR("127.0.0.0/8")
	_, v6, _ := net.ParseCIDR("::1/128")
	return []*net.IPNet{v4, v6}
}

// standingWeight is the GossipSub score of a peer whose node has full
// standing here (Mesh.SetStanding gives 1): above the opportunistic graft
// threshold, so a mesh whose median score sinks grafts such peers, and
// below the peer exchange threshold on its own. A peer with no standing
// gets 0, never a penalty: a newcomer starts where every peer did.
const standingWeight = 5

// peerScoreParams are the GossipSub scores; app is the application's
// score of a peer, from 0 to 1 (its node's standing).
func peerScoreParams(app func(peer.ID) float64) *pubsub.PeerScoreParams {
	return &pubsub.PeerScoreParams{
		Topics:                      map[string]*pubsub.TopicScoreParams{},
		TopicScoreCap:               topicScoreCap,
		AppSpecificScore:            app,
		AppSpecificWeight:           standingWeight,
		IPColocationFactorWeight:    -5,
		IPColocationFactorThreshold: 8,
		IPColocationFactorWhitelist: loopbackNets(),
		BehaviourPenaltyWeight:      -10,
		BehaviourPenaltyThreshold:   6,
		BehaviourPenaltyDecay:       pubsub.ScoreParameterDecay(10 * time.Minute),
		DecayInterval:               time.Second,
		DecayToZero:                 0.01,
		RetainScore:                 10 * time.Minute,
	}
}

// topicScoreParams are the same for every shard. Mesh message delivery
// rates (P3) are off: a shard's traffic follows its authors' activity and is
// often silent for minutes, which P3 would read as a peer withholding
// messages.
func topicScoreParams() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{
		TopicWeight:                     1,
		TimeInMeshWeight:                0.01,
		TimeInMeshQuantum:               time.Second,
		TimeInMeshCap:                   300,
		FirstMessageDeliveriesWeight:    1,
		FirstMessageDeliveriesDecay:     pubsub.ScoreParameterDecay(10 * time.Minute),
		FirstMessageDeliveriesCap:       20,
		InvalidMessageDeliveriesWeight:  invalidWeight,
		InvalidMessageDeliveriesDecay:   pubsub.ScoreParameterDecay(time.Hour),
		MeshMessageDeliveriesWeight:     0,
		MeshFailurePenaltyWeight:        0,
		MeshMessageDeliveriesDecay:      0,
		MeshMessageDeliveriesThreshold:  0,
		MeshMessageDeliveriesCap:        0,
		MeshMessageDeliveriesActivation: 0,
		MeshMessageDeliveriesWindow:     0,
	}
}

// validate is the GossipSub validator of every event topic. It rejects
// (and so penalises the forwarding peer for) anything malformed, not in
// canonical form, on the wrong shard, ephemeral or badly signed, and ignores
// (drops without penalty) what the Policy refuses: another node may run a
// different policy in good faith.
func (m *Mesh) validate(_ context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	if from == m.h.ID() {
		// Our own publication: Publish checked it and passed the decoded
		// event along, so verifying it again would only double the
		// signature work on every event a client sends.
		if _, ok := msg.ValidatorData.(*nostr.Event); ok {
			return pubsub.ValidationAccept
		}
		return pubsub.ValidationReject
	}
	shard, err := ParseTopic(msg.GetTopic())
	if err != nil {
		return m.reject(from, InvalidBadTopic)
	}
	data := msg.GetData()
	if len(data) > m.cfg.MaxMessageBytes {
		return m.reject(from, InvalidTooLarge)
	}
	ev := new(nostr.Event)
	if err := ev.UnmarshalJSON(data); err != nil {
		return m.reject(from, InvalidMalformed)
	}
	if !bytes.Equal(ev.AppendJSON(make([]byte, 0, len(data))), data) {
		return m.reject(from, InvalidNotCanonical)
	}
	if ShardOf(ev.PubKey) != shard {
		return m.reject(from, InvalidWrongShard)
	}
	if nostr.ClassOf(ev.Kind) == nostr.Ephemeral {
		return m.reject(from, InvalidEphemeral)
	}
	if err := ev.Verify(); err != nil {
		return m.reject(from, InvalidBadSignature)
	}
	if ok, reason := m.policy(ev); !ok {
		m.stats.refused(Inbound, reason)
		return pubsub.ValidationIgnore
	}
	msg.ValidatorData = ev
	return pubsub.ValidationAccept
}

// reject counts an invalid message and penalises the peer that sent it.
func (m *Mesh) reject(from peer.ID, reason string) pubsub.ValidationResult {
	m.stats.invalid(reason)
	m.misb.penalize(from, MisbehaviorInvalidGossip)
	return pubsub.ValidationReject
}

// rpcTracer counts GossipSub traffic and drops for Stats, and follows
// which peers are in this node's mesh of each topic (meshPeers).
type rpcTracer struct {
	c    *counters
	mesh *meshPeers
}

// meshPeers is the set of grafted peers per topic, as GossipSub reports
// them. It is bounded by the joined topics (at most ShardCount) times the
// connected peers.
type meshPeers struct {
	mu     sync.Mutex
	topics map[string]map[peer.ID]bool
}

func (m *meshPeers) set(topic string, p peer.ID, in bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if in {
		if m.topics[topic] == nil {
			m.topics[topic] = map[peer.ID]bool{}
		}
		m.topics[topic][p] = true
		return
	}
	delete(m.topics[topic], p)
}

func (m *meshPeers) list(topic string) []peer.ID {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]peer.ID, 0, len(m.topics[topic]))
	for p := range m.topics[topic] {
		out = append(out, p)
	}
	return out
}

func (t rpcTracer) Graft(p peer.ID, topic string) { t.mesh.set(topic, p, true) }
func (t rpcTracer) Prune(p peer.ID, topic string) { t.mesh.set(topic, p, false) }
func (t rpcTracer) Leave(topic string) {
	t.mesh.mu.Lock()
	delete(t.mesh.topics, topic)
	t.mesh.mu.Unlock()
}

var _ pubsub.RawTracer = rpcTracer{}

// SendRPCCompleted counts an RPC once it is written to the stream, so
// RPCs dropped from a full queue are not counted as sent.
func (t rpcTracer) SendRPCCompleted(rpc *pubsub.RPC, _ peer.ID, _ time.Duration) {
	n := uint64(proto.Size(&rpc.RPC))
	t.c.add(func(s *Stats) { s.RPCBytesSent += n })
}

func (t rpcTracer) RecvRPC(rpc *pubsub.RPC) {
	n := uint64(proto.Size(&rpc.RPC))
	var ihave, iwant int
	ctl := rpc.GetControl()
	for _, c := range ctl.GetIhave() {
		ihave += len(c.GetMessageIDs())
	}
	for _, c := range ctl.GetIwant() {
		iwant += len(c.GetMessageIDs())
	}
	t.c.add(func(s *Stats) {
		s.RPCBytesReceived += n
		s.MessagesReceived += uint64(len(rpc.GetPublish()))
		s.IHaveReceived += uint64(ihave)
		s.IWantReceived += uint64(iwant)
		s.GraftsReceived += uint64(len(ctl.GetGraft()))
		s.PrunesReceived += uint64(len(ctl.GetPrune()))
	})
}

func (t rpcTracer) UndeliverableMessage(*pubsub.Message) {
	t.c.add(func(s *Stats) { s.Dropped++ })
}

func (rpcTracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (rpcTracer) OnClosedOutboundStream(peer.ID)           {}
func (rpcTracer) Join(string)                              {}
func (rpcTracer) ValidateMessage(*pubsub.Message)          {}
func (rpcTracer) DeliverMessage(*pubsub.Message)           {}
func (rpcTracer) RejectMessage(*pubsub.Message, string)    {}
func (rpcTracer) DuplicateMessage(*pubsub.Message)         {}
func (rpcTracer) ThrottlePeer(peer.ID)                     {}
func (rpcTracer) SendRPC(*pubsub.RPC, peer.ID)             {}
func (rpcTracer) DropRPC(*pubsub.RPC, peer.ID)             {}
