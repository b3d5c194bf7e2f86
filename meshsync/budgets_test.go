package meshsync

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-msgio"

	"fleetmesh.org/fleetmesh/nostr"
)

// TestPeerWorkBudget checks that a peer's NEG-OPENs are charged to its
// budget, reserved before they run and settled with what they read: a
// second session goes ahead, and the peer's next one, in debt by then,
// is refused rate-limited.
func TestPeerWorkBudget(t *testing.T) {
	mn, nodes := newMesh(t, 2)
	a, b := nodes[0], nodes[1]
	// 10 rows a second with a burst of 40; each listing reads 45 rows.
	b.svc.cfg.PeerRowsPerSecond, b.svc.cfg.MaxRecords = 10, 1000
	k, _ := nostr.GenerateSecretKey()
	for i := range 45 {
		ev := signed(t, k, 1_700_000_000+int64(i), 1, fmt.Sprint(i))
		a.add(t, ev)
		b.add(t, ev)
	}
	ctx := context.Background()
	pb := mn.Peers()[1]
	// The first leaves the peer 5 rows in debt: its reservation (of 1,001
	// rows, as far as a second of debt) settled to the 45 it read.
	for i := range 2 {
		if _, err := a.svc.SyncWith(ctx, pb, nostr.Filter{}); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	// Now 45 rows in debt: 4.5 s, over the 2 s a request may wait.
	if _, err := a.svc.SyncWith(ctx, pb, nostr.Filter{}); err == nil || !strings.Contains(err.Error(), "rate-limited:") {
		t.Fatalf("third session: %v, want a rate-limited refusal", err)
	}
}

// TestViolationsPenalised checks that each protocol violation on a sync
// stream is reported to Config.Penalize with the peer that sent it, and
// that well-formed traffic is not.
func TestViolationsPenalised(t *testing.T) {
	mn, nodes := newMesh(t, 2)
	var mu sync.Mutex
	var penalised []peer.ID
	nodes[1].svc.cfg.Penalize = func(p peer.ID) {
		mu.Lock()
		defer mu.Unlock()
		penalised = append(penalised, p)
	}
	from, to := mn.Hosts()[0], mn.Peers()[1]
	for _, tc := range []struct {
		name   string
		frame  string
		punish bool
	}{
		{"not JSON", `{{{`, true},
		{"no message type", `[1,2]`, true},
		{"unknown type", `["HELLO"]`, true},
		{"NEG-MSG before NEG-OPEN", `["NEG-MSG","sync","61"]`, true},
		{"NEG-OPEN without a message", `["NEG-OPEN","sync",{}]`, true},
		{"NEG-OPEN not hex", `["NEG-OPEN","sync",{},"zz"]`, true},
		{"NEG-OPEN malformed negentropy", `["NEG-OPEN","sync",{},"ff00"]`, true},
		{"REQ with two filters", `["REQ","x",{},{}]`, true},
		{"EVENT that is no event", `["EVENT",[1]]`, true},
		{"well-formed REQ", `["REQ","x",{"kinds":[1]}]`, false},
		{"NEG-CLOSE", `["NEG-CLOSE","sync"]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			penalised = nil
			mu.Unlock()
			s, err := from.NewStream(context.Background(), to, protocol.ID(ProtocolID))
			if err != nil {
				t.Fatal(err)
			}
			w, r := msgio.NewVarintWriter(s), msgio.NewVarintReaderSize(s, MaxFrameBytes)
			if err := w.WriteMsg([]byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
			s.CloseWrite()
			// The service answers (or ends the stream) after judging
			// the frame; read until it is done.
			s.SetReadDeadline(time.Now().Add(10 * time.Second))
			for {
				if _, err := r.ReadMsg(); err != nil {
					break
				}
			}
			s.Close()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tc.punish && (len(penalised) != 1 || penalised[0] != from.ID()):
				t.Fatalf("penalised %v, want %s once", penalised, from.ID())
			case !tc.punish && len(penalised) != 0:
				t.Fatalf("penalised %v for a well-formed frame", penalised)
			}
		})
	}
}
