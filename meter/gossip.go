package meter

import (
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// GossipTracer returns a GossipSub tracer that meters forwarded events:
// messages in an RPC written to a peer are events given to it, messages
// received from a peer (new or duplicate) are events received from it.
// Both ends count at the RPC, so a pair's figures agree.
func GossipTracer(m *Meter) pubsub.RawTracer { return gossipTracer{m} }

type gossipTracer struct{ m *Meter }

func (t gossipTracer) SendRPCCompleted(rpc *pubsub.RPC, p peer.ID, _ time.Duration) {
	for _, msg := range rpc.GetPublish() {
		t.m.Event(p, Gave, msg.GetData())
	}
}

func (t gossipTracer) received(msg *pubsub.Message) {
	t.m.Event(msg.ReceivedFrom, Received, msg.GetData())
}

func (t gossipTracer) ValidateMessage(msg *pubsub.Message)  { t.received(msg) }
func (t gossipTracer) DuplicateMessage(msg *pubsub.Message) { t.received(msg) }

func (gossipTracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (gossipTracer) OnClosedOutboundStream(peer.ID)           {}
func (gossipTracer) Join(string)                              {}
func (gossipTracer) Leave(string)                             {}
func (gossipTracer) Graft(peer.ID, string)                    {}
func (gossipTracer) Prune(peer.ID, string)                    {}
func (gossipTracer) DeliverMessage(*pubsub.Message)           {}
func (gossipTracer) RejectMessage(*pubsub.Message, string)    {}
func (gossipTracer) ThrottlePeer(peer.ID)                     {}
func (gossipTracer) RecvRPC(*pubsub.RPC)                      {}
func (gossipTracer) SendRPC(*pubsub.RPC, peer.ID)             {}
func (gossipTracer) DropRPC(*pubsub.RPC, peer.ID)             {}
func (gossipTracer) UndeliverableMessage(*pubsub.Message)     {}
