package accounting

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	dto "github.com/prometheus/client_model/go"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
)

// TestForkInProposalHead: a proposal whose head is a co-signed receipt at
// a seq the responder already holds, with other content, is refused and
// becomes a fork proof; the proof is kept across a restart, so the node
// does not take (or spread) it again as new.
func TestForkInProposalHead(t *testing.T) {
	cfg := testConfig()
	nodes, a, b := newPair(t, cfg)
	traffic(a, b, 4, 100)
	closeWindow(nodes, t0.Add(window+time.Millisecond))
	closeWindow(nodes, t0.Add(2*window+time.Millisecond)) // window 2 closes, with no traffic
	held, _ := b.s.Receipts(b.key.DID())
	if len(held) != 1 {
		t.Fatalf("b holds %d receipts", len(held))
	}
	// Both keys sign a second seq 1 with other figures.
	other := receipt.New(a.key.DID(), b.key.DID(), t0.Unix(), 10, 1, cid.Undef,
		receipt.Side{Gave: receipt.Counts{Events: 400}}, receipt.Side{Received: receipt.Counts{Events: 400}})
	other.Sign(a.key)
	other.Sign(b.key)
	body := exchange.Propose(other, t0.Unix()+10, 10, receipt.Side{}, 1, exchange.DefaultBounds)
	raw, _ := json.Marshal(body)
	_, err := b.s.handlePropose(&didcomm.Message{ID: "p", Type: exchange.TypePropose, From: a.key.DID(), Body: raw})
	if err == nil || !strings.Contains(err.Error(), "fork proof built") {
		t.Fatalf("a proposal on a forked head: %v", err)
	}
	var proofs []*receipt.ForkProof
	eventually(t, 10*time.Second, "b keeps the fork proof", func() bool {
		proofs, _ = b.s.ForkProofs()
		return len(proofs) == 1
	})
	x, y, err := proofs[0].Verify()
	if err != nil || x.Seq != 1 || y.Seq != 1 {
		t.Fatalf("proof: %v", err)
	}
	// A report carrying the other side of the fork, fetched by a node
	// that holds the first, is caught too.
	otherRaw, _ := other.Encode()
	rep := &receipt.Report{V: receipt.Version, Node: a.key.DID(), WindowStart: t0.Unix(), WindowSecs: 10, Receipts: [][]byte{otherRaw}, Disputed: [][]byte{}}
	if err := rep.Sign(a.key); err != nil {
		t.Fatal(err)
	}
	repRaw, _ := rep.Encode()
	if err := a.s.ingestReport(repRaw, a.key.DID()); err != nil {
		t.Fatal(err)
	}
	var built dto.Metric
	a.s.m.forkProofs.WithLabelValues("built").Write(&built)
	if built.GetCounter().GetValue() != 1 {
		t.Fatal("a fetched report with the other side of a fork built no proof")
	}
	b.close()
	b.open(t, cfg)
	if b.s.keepAndSpread(proofs[0], "", false) {
		t.Fatal("after a restart the proof was taken as new")
	}
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDisputeEvidence: y claims to have given x five events x never
// received. The window is disputed; in the exchange each side sends the
// digest and sample of the events it counted, and each finds, checking
// the other's, that the events x gave y are the same at both ends and
// which five events y counts as given that x did not receive. Both keep
// the findings with the disputed window.
func TestDisputeEvidence(t *testing.T) {
	nodes := newNodes(t, 2, testConfig(), nil)
	x, y := nodes[0], nodes[1]
	event := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"id":"%016x%048x","content":"e"}`, uint64(i+1)*0x9e3779b97f4a7c15, 0))
	}
	for i := range 10 {
		x.s.meter.Event(y.h.ID(), meter.Gave, event(i))
		y.s.meter.Event(x.h.ID(), meter.Received, event(i))
	}
	var claimed []string
	for i := 100; i < 105; i++ {
		y.s.meter.Event(x.h.ID(), meter.Gave, event(i))
		k, _ := meter.EventKey(event(i))
		claimed = append(claimed, receipt.Key(k))
	}
	for w := 1; w <= 4; w++ {
		closeWindow(nodes, t0.Add(time.Duration(w)*window+time.Millisecond))
	}
	for _, n := range nodes {
		n.s.Round(context.Background(), t0.Add(9*window))
	}
	for _, c := range []struct {
		n          *testNode
		same, diff string
	}{
		{x, "this node gave, the peer received: the same 10 events", "counted by the peer and not by this node"},
		{y, "the peer gave, this node received: the same 10 events", "counted by this node and not by the peer"},
	} {
		ds, err := c.n.s.Disputes()
		if err != nil || len(ds) != 1 {
			t.Fatalf("%d disputes: %v", len(ds), err)
		}
		d := ds[0]
		if d.WindowStart != t0.Unix() || d.Evidence == nil || d.TheirEvidence == nil {
			t.Fatalf("dispute record %+v", d)
		}
		all := strings.Join(d.Findings, "\n")
		if !strings.Contains(all, c.same) || !strings.Contains(all, "5 sampled events "+c.diff) {
			t.Fatalf("findings:\n%s", all)
		}
		for _, k := range claimed[:4] {
			if !strings.Contains(all, k) {
				t.Fatalf("findings do not name event %s:\n%s", k, all)
			}
		}
	}
}

// TestLostWindowReportedAtBothEnds: a lost a window's figures (killed
// before it saved them) and has since co-signed a later window with b.
// b, which holds figures for the lost window, asks a to propose it; the
// chain has passed it, so a reports it disputed at once, and b reports it
// disputed at the end of its dispute period: neither drops it.
func TestLostWindowReportedAtBothEnds(t *testing.T) {
	cfg := testConfig()
	// b asks for a missing proposal after half of this: after a has
	// proposed the next window.
	cfg.DisputePeriod = setting.DurationOf(4 * window)
	nodes, a, b := newPair(t, cfg)
	// Window 1: only b counted (a's count died with it).
	b.s.meter.Record(a.h.ID(), meter.Events, meter.Received, 7)
	closeWindow(nodes, t0.Add(window+time.Millisecond))
	// Window 2: both counted; a proposes it, its only window.
	traffic(a, b, 3, 100)
	closeWindow(nodes, t0.Add(2*window+time.Millisecond))
	if rs, _ := a.s.Receipts(a.key.DID()); len(rs) != 1 || rs[0].WindowStart != t0.Unix()+10 {
		t.Fatalf("a holds %d receipts", len(rs))
	}
	// Past half of window 1's dispute period b asks for it; past the
	// whole of it b gives up; after the reports are due both report it.
	ctx := context.Background()
	for _, at := range []time.Duration{3*window + 5*time.Second, 6 * window, 12 * window} {
		for _, n := range []*testNode{b, a} {
			n.s.Round(ctx, t0.Add(at))
		}
	}
	for name, n := range map[string]*testNode{"a": a, "b": b} {
		reps, _ := n.s.Reports(n.key.DID())
		found := false
		for _, rep := range reps {
			if rep.WindowStart == t0.Unix() && len(rep.Disputed) == 1 {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s does not report window 1 disputed (%d reports)", name, len(reps))
		}
	}
}
