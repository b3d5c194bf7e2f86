package mesh

import (
	"bytes"
	"context"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestValidator feeds the GossipSub validator one message per rule and
// checks the verdict and the counter it moves.
func TestValidator(t *testing.T) {
	_, nodes := newMockMesh(t, 1, func(int, []*testNode) Config {
		cfg := testConfig()
		cfg.MaxMessageBytes = 4096
		return cfg
	}, func(int) Hooks { return Hooks{Policy: refuseSecret} })
	m := nodes[0].m
	au := newAuthor(t)
	good := au.event(t, 1, "hello")
	goodJSON := good.AppendJSON(nil)
	secret := au.event(t, 1, "psst")
	secret.Tags = nostr.Tags{{"t", secretTag}}
	if err := au.sk.Sign(secret); err != nil {
		t.Fatal(err)
	}
	ephemeral := au.event(t, 20001, "now or never")
	badSig := au.event(t, 1, "forged")
	badSig.Sig[0] ^= 1
	other := authorsOnDistinctShards(t, 2)
	wrongShard := other[1].event(t, 1, "elsewhere")
	if other[1].shard == au.shard {
		wrongShard = other[0].event(t, 1, "elsewhere")
	}
	spaced := bytes.Replace(goodJSON, []byte(`,"kind"`), []byte(`, "kind"`), 1)
	topic := Topic(au.shard)
	remote := peer.ID("a remote peer")
	tests := []struct {
		name    string
		topic   string
		data    []byte
		want    pubsub.ValidationResult
		counter func(s Stats) uint64
	}{
		{"valid", topic, goodJSON, pubsub.ValidationAccept, func(s Stats) uint64 { return 0 }},
		{"bad topic", "/fleetmesh/events/1/author/0256", goodJSON, pubsub.ValidationReject, func(s Stats) uint64 { return s.Invalid[InvalidBadTopic] }},
		{"too large", topic, bytes.Repeat([]byte(" "), 5000), pubsub.ValidationReject, func(s Stats) uint64 { return s.Invalid[InvalidTooLarge] }},
		{"malformed", topic, []byte(`{"id":1}`), pubsub.ValidationReject, func(s Stats) uint64 { return s.Invalid[InvalidMalformed] }},
		{"not canonical", topic, spaced, pubsub.ValidationReject, func(s Stats) uint64 { return s.Invalid[InvalidNotCanonical] }},
		{"wrong shard", topic, wrongShard.AppendJSON(nil), pubsub.ValidationReject, func(s Stats) uint64 { return s.Invalid[InvalidWrongShard] }},
		{"ephemeral", topic, ephemeral.AppendJSON(nil), pubsub.ValidationReject, func(s Stats) uint64 { return s.Invalid[InvalidEphemeral] }},
		{"bad signature", topic, badSig.AppendJSON(nil), pubsub.ValidationReject, func(s Stats) uint64 { return s.Invalid[InvalidBadSignature] }},
		{"policy", topic, secret.AppendJSON(nil), pubsub.ValidationIgnore, func(s Stats) uint64 { return s.Refused[Inbound]["tagged secret"] }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.counter(m.Stats())
			msg := &pubsub.Message{Message: &pb.Message{Topic: &tc.topic, Data: tc.data}}
			if got := m.validate(context.Background(), remote, msg); got != tc.want {
				t.Fatalf("verdict %v, want %v", got, tc.want)
			}
			if tc.want == pubsub.ValidationAccept {
				ev, ok := msg.ValidatorData.(*nostr.Event)
				if !ok || ev.ID != good.ID {
					t.Fatal("an accepted message does not carry its decoded event")
				}
				return
			}
			if after := tc.counter(m.Stats()); after != before+1 {
				t.Fatalf("counter went from %d to %d, want +1", before, after)
			}
		})
	}
	// Our own publication carries the event Publish decoded and is not
	// checked again; without it, it is refused.
	own := &pubsub.Message{Message: &pb.Message{Topic: &topic, Data: goodJSON}, ValidatorData: good}
	if got := m.validate(context.Background(), nodes[0].h.ID(), own); got != pubsub.ValidationAccept {
		t.Errorf("own publication: verdict %v, want accept", got)
	}
	bare := &pubsub.Message{Message: &pb.Message{Topic: &topic, Data: goodJSON}}
	if got := m.validate(context.Background(), nodes[0].h.ID(), bare); got != pubsub.ValidationReject {
		t.Errorf("own publication without its event: verdict %v, want reject", got)
	}
	// Publish applies the rules that its callers' verification does not
	// cover before anything is sent: the id and the signature are the
	// caller's to check.
	for _, ev := range []*nostr.Event{ephemeral, secret} {
		if err := m.Publish(context.Background(), ev); err == nil {
			t.Errorf("Publish accepted event %q", ev.Content)
		}
	}
}
