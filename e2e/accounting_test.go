package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// receiptJSON is the part of `fleetmesh receipts --json` these tests read.
type receiptJSON struct {
	CID         string          `json:"cid"`
	A           string          `json:"a"`
	B           string          `json:"b"`
	Seq         uint64          `json:"seq"`
	Prev        *string         `json:"prev"`
	WindowStart int64           `json:"window_start"`
	Settlement  json.RawMessage `json:"settlement"`
	SigA        string          `json:"sig_a"`
	SigB        string          `json:"sig_b"`
	CountsA     sideJSON        `json:"counts_a"`
	CountsB     sideJSON        `json:"counts_b"`
}

type sideJSON struct {
	Gave     struct{ Events, Bytes uint64 } `json:"gave"`
	Received struct{ Events, Bytes uint64 } `json:"received"`
}

func (r receiptJSON) side(did string) sideJSON {
	if did == r.A {
		return r.CountsA
	}
	return r.CountsB
}

// accountingConfig is a mesh node with windows of a few seconds whose
// anti-entropy rounds are rare, so that events travel by gossip alone and
// the figures can be compared with what the test sent.
const accountingConfig = "\n[mesh]\nsync_interval = \"1h\"\nmaintain_interval = \"1s\"\n" +
	"\n[accounting]\nwindow = '2s'\ndispute_period = '4s'\n"

func receipts(t *testing.T, home, did string) []receiptJSON {
	t.Helper()
	out, errOut, err := cli(t, "receipts", "--home", home, "--node", did, "--json")
	if err != nil {
		t.Fatalf("fleetmesh receipts: %v\n%s", err, errOut)
	}
	var rs []receiptJSON
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("fleetmesh receipts --json printed %q: %v", out, err)
	}
	return rs
}

func verifyReceipts(t *testing.T, home, did string) {
	t.Helper()
	if _, errOut, err := cli(t, "receipts", "--home", home, "--node", did, "--verify"); err != nil {
		t.Fatalf("fleetmesh receipts --verify at %s for %s: %v\n%s", home, did, err, errOut)
	}
}

// startPair starts two accounting nodes, y bootstrapping from x, and
// waits until an event crosses.
func startPair(t *testing.T) (x, y *meshNode, xh, yh string, u *user) {
	xh, yh = newHome(t, accountingConfig), newHome(t, accountingConfig)
	x = startMeshNode(t, xh)
	y = startMeshNode(t, yh, x.mesh)
	x.did, y.did = runID(t, xh).DID, runID(t, yh).DID
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	waitEverywhere(t, "warm-up", []*meshNode{y}, []string{publishAt(t, x, u, "warm-up")})
	return
}

// TestAccountingTwoNodes: two node processes with grants both ways and
// 2-second windows; events flow both ways for a few windows. Every window
// with traffic gets a receipt both sides signed, the chain verifies from
// the first receipt at both nodes (and each node's chain fetched through
// the other), and the counts add up to what the test sent.
func TestAccountingTwoNodes(t *testing.T) {
	x, y, xh, yh, u := startPair(t)
	for _, g := range []struct{ home, to string }{{xh, y.did}, {yh, x.did}} {
		out, errOut, err := cli(t, "grants", "offer", "--home", g.home, "--to", g.to, "--quota", "1000", "--length", "1h", "--notice", "1m")
		if err != nil || !strings.Contains(out, `"state": "active"`) {
			t.Fatalf("grants offer: %v\n%s\n%s", err, out, errOut)
		}
	}
	out, _, err := cli(t, "grants", "list", "--home", xh, "--json")
	var gs []struct{ State, Direction string }
	if err != nil || json.Unmarshal([]byte(out), &gs) != nil || len(gs) != 2 {
		t.Fatalf("grants list: %v %s", err, out)
	}
	sentX, sentY := 1, 0 // the warm-up event
	var idsX, idsY []string
	for w := 0; w < 3; w++ {
		// Publish in the middle of a window, so that few events are in
		// flight at a boundary.
		time.Sleep(time.Until(time.Now().Truncate(2 * time.Second).Add(2*time.Second + 500*time.Millisecond)))
		for i := 0; i < 5; i++ {
			idsX = append(idsX, publishAt(t, x, u, fmt.Sprintf("x %d %d", w, i)))
			idsY = append(idsY, publishAt(t, y, u, fmt.Sprintf("y %d %d", w, i)))
		}
		sentX += 5
		sentY += 5
	}
	waitEverywhere(t, "x's events", []*meshNode{y}, idsX)
	waitEverywhere(t, "y's events", []*meshNode{x}, idsY)
	// Wait until the last traffic's window is receipted at both.
	var rx, ry []receiptJSON
	deadline := time.Now().Add(60 * time.Second)
	for {
		rx, ry = receipts(t, xh, x.did), receipts(t, yh, y.did)
		gx, gy := 0, 0
		for _, r := range rx {
			gx += int(r.side(x.did).Gave.Events)
			gy += int(r.side(y.did).Gave.Events)
		}
		if len(rx) == len(ry) && gx >= sentX && gy >= sentY {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("receipts: x holds %d, y %d; x gave %d of %d events, y %d of %d\n%s\n%s", len(rx), len(ry), gx, sentX, gy, sentY, x.output(), y.output())
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(rx) < 3 {
		t.Fatalf("%d receipts for at least 3 windows of traffic", len(rx))
	}
	gx, gy, rxy, ryx := 0, 0, 0, 0
	for i, r := range rx {
		if r.Seq != uint64(i+1) || (i == 0) != (r.Prev == nil) || string(r.Settlement) != "null" || r.SigA == "" || r.SigB == "" {
			t.Fatalf("receipt %d: seq %d prev %v settlement %s", i, r.Seq, r.Prev, r.Settlement)
		}
		if i > 0 && *r.Prev != rx[i-1].CID {
			t.Fatalf("receipt %d: prev %s, want %s", i, *r.Prev, rx[i-1].CID)
		}
		if r.CID != ry[i].CID || r.SigA != ry[i].SigA || r.SigB != ry[i].SigB {
			t.Fatalf("receipt %d differs between the two nodes", i)
		}
		gx += int(r.side(x.did).Gave.Events)
		gy += int(r.side(y.did).Gave.Events)
		rxy += int(r.side(y.did).Received.Events)
		ryx += int(r.side(x.did).Received.Events)
	}
	// The figures add up to what the test sent (sums, since an event in
	// flight at a boundary may fall in neighbouring windows at the two
	// ends), give or take the mesh's own redundancy: the start-up sync
	// round may fetch an event gossip also delivers (both sides count the
	// second transfer), and the sender counts a GossipSub RPC the receiver
	// dropped unread before it had joined the topic (the sender alone).
	within := func(got, sent int) bool { return got >= sent && got <= sent+2 }
	if !within(rxy, sentX) || !within(ryx, sentY) || !within(gx, sentX) || !within(gy, sentY) {
		t.Fatalf("receipts say x gave %d events (y received %d) and y gave %d (x received %d); the test sent %d and %d", gx, rxy, gy, ryx, sentX, sentY)
	}
	verifyReceipts(t, xh, x.did)
	verifyReceipts(t, yh, y.did)
	// Each node's receipts, asked of the other node.
	verifyReceipts(t, xh, y.did)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fams, err := metrics(ctx, x.node)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sample(fams, "fleetmesh_accounting_receipts_total", "result", "signed"); !ok || int(v) < len(rx) {
		t.Fatalf("fleetmesh_accounting_receipts_total{result=signed} = %v, want >= %d", v, len(rx))
	}
}

// TestAccountingKillAtWindowClose kills either node with SIGKILL at a
// random point of a window close, a bounded number of times (3; 10 with
// FLEETMESH_SOAK=1), restarting it each time, with traffic flowing. After
// the loop both chains verify, and wherever both nodes hold a receipt for
// a seq it is the same receipt: none was lost or signed twice.
func TestAccountingKillAtWindowClose(t *testing.T) {
	x, y, xh, yh, u := startPair(t)
	rounds := 3
	if os.Getenv("FLEETMESH_SOAK") != "" {
		rounds = 10
	}
	for i := 0; i < rounds; i++ {
		publishAt(t, x, u, fmt.Sprintf("x %d", i))
		publishAt(t, y, u, fmt.Sprintf("y %d", i))
		// Sleep to just past a window boundary, then a random part of
		// the close (the exchange runs within the first fifth).
		now := time.Now()
		next := now.Truncate(2 * time.Second).Add(2 * time.Second)
		time.Sleep(time.Until(next) + time.Duration(rand.IntN(600))*time.Millisecond)
		victim, vh, other := x, xh, y
		if rand.IntN(2) == 0 {
			victim, vh, other = y, yh, x
		}
		victim.kill()
		restarted := startMeshNode(t, vh, other.mesh)
		restarted.did = victim.did
		if victim == x {
			x = restarted
		} else {
			y = restarted
		}
	}
	// Quiet windows let the last exchanges and any resends finish.
	publishAt(t, x, u, "after")
	time.Sleep(10 * time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for {
		rx, ry := receipts(t, xh, x.did), receipts(t, yh, y.did)
		bySeq := map[uint64]string{}
		for _, r := range rx {
			bySeq[r.Seq] = r.CID
		}
		for _, r := range ry {
			if c, ok := bySeq[r.Seq]; ok && c != r.CID {
				t.Fatalf("seq %d: x holds %s, y holds %s: signed twice", r.Seq, c, r.CID)
			}
		}
		if len(rx) == len(ry) && len(rx) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("x holds %d receipts, y %d\n%s\n%s", len(rx), len(ry), x.output(), y.output())
		}
		time.Sleep(500 * time.Millisecond)
	}
	verifyReceipts(t, xh, x.did)
	verifyReceipts(t, yh, y.did)
}
