package mesh

import (
	"testing"

	"fleetmesh.org/fleetmesh/descriptor"
)

// TestPeerExchangeJoining checks the rule that decides whether a new
// connection starts a peer exchange: only while the node holds fewer
// verified descriptors of others than one exchange carries
// (Config.PEXMaxDescriptors). Descriptors go in through accept, as they do
// from the wire; its own descriptor and rejected ones do not count.
func TestPeerExchangeJoining(t *testing.T) {
	const max = 3
	_, nodes := newMockMesh(t, 6, func(int, []*testNode) Config {
		cfg := testConfig()
		cfg.PEXMaxDescriptors = max
		return cfg
	}, func(int) Hooks {
		return Hooks{VerifyDescriptor: VerifyWith(descriptor.NewVerifier(descriptor.VerifierConfig{}))}
	})
	self := nodes[0]
	own := signDescriptor(t, self, 1)
	if err := self.m.SetLocalDescriptor(own); err != nil {
		t.Fatal(err)
	}
	forged := signDescriptor(t, nodes[5], 1)
	forged = append(forged[:len(forged)-4:len(forged)-4], "AAAA"...)
	tests := []struct {
		name    string
		give    [][]byte
		kept    int
		joining bool
	}{
		{"knows nobody", nil, 0, true},
		{"its own descriptor does not count", [][]byte{own}, 0, true},
		{"a forged descriptor does not count", [][]byte{forged}, 0, true},
		{"two others, fewer than a message", [][]byte{signDescriptor(t, nodes[1], 1), signDescriptor(t, nodes[2], 1)}, 2, true},
		{"the same two again", [][]byte{signDescriptor(t, nodes[1], 1), signDescriptor(t, nodes[2], 1)}, 0, true},
		{"a third fills one message", [][]byte{signDescriptor(t, nodes[3], 1)}, 1, false},
		{"more stays past joining", [][]byte{signDescriptor(t, nodes[4], 1)}, 1, false},
	}
	for _, tt := range tests {
		if kept := self.m.pex.accept(tt.give); kept != tt.kept {
			t.Errorf("%s: accept kept %d descriptors, want %d", tt.name, kept, tt.kept)
		}
		if got := self.m.pex.joining(); got != tt.joining {
			t.Errorf("%s: joining() = %v, want %v", tt.name, got, tt.joining)
		}
	}
}
