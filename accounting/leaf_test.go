package accounting

import (
	"context"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
)

// counted reports how many windows a node holds pending and disputed
// with peer.
func counted(t *testing.T, n *testNode, peer string) (pending, disputed int) {
	t.Helper()
	n.s.db.b.View(func(tx *bolt.Tx) error {
		ps, err := pendingFor(tx, peer)
		if err != nil {
			t.Fatal(err)
		}
		pending = len(ps)
		return tx.Bucket(bDisputed).ForEach(func(_, _ []byte) error { disputed++; return nil })
	})
	return pending, disputed
}

// A home with a leaf (SetLeaves) never proposes the leaf's windows and
// keeps them past the dispute period, takes the leaf's proposal whichever
// way the DIDs sort, answers as the responder (nothing left for it to
// resend), and disputes a window only after the leaf dispute period.
func TestLeafProposesAndHomeWaits(t *testing.T) {
	cfg := testConfig()
	cfg.LeafDisputePeriod = 10 * window
	nodes := newNodes(t, 2, cfg, nil)
	home, leaf := nodes[0], nodes[1]
	home.s.SetLeaves(func(did string) bool { return did == leaf.key.DID() })
	ctx := context.Background()
	// serve counts mediation in the open window, which ends at window
	// boundary w, and closes it.
	serve := func(w int) {
		home.s.meter.Record(leaf.h.ID(), meter.MediationMessages, meter.Gave, 4)
		end := t0.Add(time.Duration(w) * window)
		home.s.Round(ctx, end.Add(time.Millisecond))
		home.s.Round(ctx, end.Add(2*time.Millisecond))
	}
	serve(1)
	// Past the ordinary dispute period the window still waits.
	home.s.Round(ctx, t0.Add(window+cfg.DisputePeriod.Duration+time.Second))
	if p, d := counted(t, home, leaf.key.DID()); p != 1 || d != 0 {
		t.Fatalf("after the dispute period: %d pending, %d disputed; want the window waiting for the leaf", p, d)
	}
	if rs, _ := leaf.s.Receipts(leaf.key.DID()); len(rs) != 0 {
		t.Fatal("the home proposed to its leaf")
	}

	// The leaf wakes and proposes window 1.
	mine := receipt.Side{Received: receipt.Counts{MediationMessages: 4}}
	body := exchange.Propose(nil, t0.Unix(), int64(window/time.Second), mine, 1, exchange.DefaultBounds)
	reply := call(t, home, leaf, exchange.TypePropose, body)
	if reply.Type != exchange.TypeSign {
		t.Fatalf("answer %s, want sign", reply.Type)
	}
	r, err := exchange.CheckSigned(reply.Body, leaf.key.DID(), home.key.DID(), nil, int64(window/time.Second), exchange.DefaultBounds,
		func(int64) (receipt.Side, bool) { return mine, true })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Sign(leaf.key); err != nil {
		t.Fatal(err)
	}
	raw, _ := r.Encode()
	if ack := call(t, home, leaf, exchange.TypeCountersign, exchange.ReceiptBody{Receipt: raw}); ack.Type != exchange.TypeAck {
		t.Fatalf("answer %s, want ack", ack.Type)
	}
	rs, err := home.s.Receipts(leaf.key.DID())
	if err != nil || len(rs) != 1 || rs[0].Side(home.key.DID()).Gave.MediationMessages != 4 {
		t.Fatalf("home holds %d receipts of its leaf (%v)", len(rs), err)
	}
	home.s.db.b.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bUnacked).Get([]byte(rs[0].PairKey())) != nil {
			t.Error("the home, the responder, marked a countersignature to resend")
		}
		return nil
	})

	// A window the leaf never proposes is disputed after the leaf
	// dispute period, not before.
	serve(4) // the round above opened the window ending at 4
	end2 := t0.Add(4 * window)
	home.s.Round(ctx, end2.Add(cfg.LeafDisputePeriod-time.Second))
	if p, d := counted(t, home, leaf.key.DID()); p != 1 || d != 0 {
		t.Fatalf("before the leaf dispute period: %d pending, %d disputed", p, d)
	}
	home.s.Round(ctx, end2.Add(cfg.LeafDisputePeriod+time.Second))
	if p, d := counted(t, home, leaf.key.DID()); p != 0 || d != 1 {
		t.Fatalf("after the leaf dispute period: %d pending, %d disputed", p, d)
	}
}

// call hands from's message of type typ to n's receipt handler, as the
// agent would after unpacking it.
func call(t *testing.T, n, from *testNode, typ string, body any) *didcomm.Message {
	t.Helper()
	m, err := didcomm.NewMessage(typ, body)
	if err != nil {
		t.Fatal(err)
	}
	m.From = from.key.DID()
	out, err := n.s.handleReceipt(context.Background(), &didcomm.Unpacked{Message: m, Authenticated: true})
	if err != nil {
		t.Fatal(err)
	}
	if out == nil {
		t.Fatalf("no answer to %s", typ)
	}
	return out
}
