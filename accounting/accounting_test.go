package accounting

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"
	dto "github.com/prometheus/client_model/go"
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
)

// t0 is a window boundary the tests' fake clock starts at.
var t0 = time.Unix(1_800_000_000-1_800_000_000%3600, 0)

const window = 10 * time.Second

type testNode struct {
	key *identity.Key
	h   host.Host
	ag  *agent.Service
	s   *Service
	dir string
}

func testConfig() Config {
	return Config{Window: setting.DurationOf(window), Tolerance: 0.02, DisputePeriod: setting.DurationOf(2 * window), DisputeRounds: 3, AcceptGrants: true}
}

// newNodes makes count nodes on a linked, connected mocknet.
func newNodes(t testing.TB, count int, cfg Config, connect func(mn mocknet.Mocknet) error) []*testNode {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { mn.Close() })
	nodes := make([]*testNode, count)
	for i := range nodes {
		key, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		addr, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4001", (i+1)>>16, ((i+1)>>8)&0xff, (i+1)&0xff))
		if err != nil {
			t.Fatal(err)
		}
		h, err := mn.AddPeer(key.Libp2pKey(), addr)
		if err != nil {
			t.Fatal(err)
		}
		n := &testNode{key: key, h: h, dir: t.TempDir()}
		n.open(t, cfg)
		nodes[i] = n
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if connect == nil {
		connect = func(mn mocknet.Mocknet) error { return mn.ConnectAllButSelf() }
	}
	if err := connect(mn); err != nil {
		t.Fatal(err)
	}
	return nodes
}

// newPair makes two connected nodes, a the pair's proposer (its DID
// sorts first) and b the other.
func newPair(t testing.TB, cfg Config) (nodes []*testNode, a, b *testNode) {
	t.Helper()
	nodes = newNodes(t, 2, cfg, nil)
	a, b = nodes[0], nodes[1]
	if a.key.DID() > b.key.DID() {
		a, b = b, a
	}
	return nodes, a, b
}

func (n *testNode) open(t testing.TB, cfg Config) { n.openAt(t, cfg, t0) }

// openAt opens the node's accounting as a node started at now would.
func (n *testNode) openAt(t testing.TB, cfg Config, now time.Time) {
	t.Helper()
	ag, err := agent.New(n.key, n.dir+"/didcomm", nil)
	if err != nil {
		t.Fatal(err)
	}
	ag.AttachLibp2p(n.h)
	// The meter's clock stands at now: the test moves the windows itself
	// (Round with a time of its own).
	m := meter.New(n.h.ID(), cfg.Window.Duration, now)
	m.SetClock(func() time.Time { return now })
	s, err := New(n.key, cfg, n.dir+"/accounting", m, ag, n.h, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The mesh's sync protocol answers and fetches receipts, as a node
	// wires it.
	sync := meshsync.New(n.h, nil, nil, meshsync.Config{Receipts: s.Page}, nil)
	s.SetFetcher(sync.FetchReceipts)
	n.ag, n.s = ag, s
	t.Cleanup(func() { n.close() })
}

func (n *testNode) close() {
	if n.s != nil {
		n.s.Close()
		n.ag.Close()
		n.s = nil
	}
}

// closeWindow runs the rounds that close the window before at on every
// node: each rolls, then each saves its figures and exchanges; b sides go
// first so they hold their figures when a proposes.
func closeWindow(nodes []*testNode, at time.Time) {
	ctx := context.Background()
	for _, n := range nodes {
		n.s.Round(ctx, at)
	}
	later := at.Add(time.Millisecond)
	for _, n := range nodes {
		n.s.Round(ctx, later)
	}
	// A second pass lets every a propose after every b has saved.
	for _, n := range nodes {
		n.s.Round(ctx, later.Add(time.Millisecond))
	}
}

// traffic records that from gave to events of size bytes each, as both
// sides' meters would.
func traffic(from, to *testNode, events, size uint64) {
	from.s.meter.Record(to.h.ID(), meter.Events, meter.Gave, events)
	from.s.meter.Record(to.h.ID(), meter.Bytes, meter.Gave, events*size)
	to.s.meter.Record(from.h.ID(), meter.Events, meter.Received, events)
	to.s.meter.Record(from.h.ID(), meter.Bytes, meter.Received, events*size)
}

func TestWindowCloseChainsReceipts(t *testing.T) {
	nodes := newNodes(t, 2, testConfig(), nil)
	x, y := nodes[0], nodes[1]
	for w := 1; w <= 3; w++ {
		traffic(x, y, uint64(10*w), 300)
		traffic(y, x, 5, 100)
		closeWindow(nodes, t0.Add(time.Duration(w)*window+time.Millisecond))
	}
	for _, n := range nodes {
		rs, err := n.s.Receipts(n.key.DID())
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 3 {
			t.Fatalf("%d receipts, want one per window (3)", len(rs))
		}
		if k, err := receipt.VerifyChain(n.key.DID(), rs); err != nil || k != 3 {
			t.Fatalf("chain: %d, %v", k, err)
		}
		for i, r := range rs {
			if got := r.Side(x.key.DID()).Gave.Events; got != uint64(10*(i+1)) {
				t.Fatalf("window %d: x gave %d events, want %d", i+1, got, 10*(i+1))
			}
			if r.Side(y.key.DID()).Received.Bytes != uint64(10*(i+1))*300 {
				t.Fatalf("window %d: y's received bytes %d", i+1, r.Side(y.key.DID()).Received.Bytes)
			}
			if r.WindowStart != t0.Unix()+int64(i)*10 {
				t.Fatalf("receipt %d is for window %d", i, r.WindowStart)
			}
		}
	}
	// Both hold byte-identical receipts.
	rx, _ := x.s.Receipts(x.key.DID())
	ry, _ := y.s.Receipts(y.key.DID())
	for i := range rx {
		a, _ := rx[i].Encode()
		b, _ := ry[i].Encode()
		if string(a) != string(b) {
			t.Fatalf("receipt %d differs between the two sides", i)
		}
	}
	// After the dispute period each side reports the windows.
	for _, n := range nodes {
		n.s.Round(context.Background(), t0.Add(7*window))
		reps, err := n.s.Reports(n.key.DID())
		if err != nil || len(reps) != 3 {
			t.Fatalf("%d reports, %v; want 3", len(reps), err)
		}
	}
}

func TestOverClaimOpensDispute(t *testing.T) {
	nodes := newNodes(t, 2, testConfig(), nil)
	x, y := nodes[0], nodes[1]
	traffic(x, y, 10, 300)
	// y claims to have given x 500 events x never saw.
	y.s.meter.Record(x.h.ID(), meter.Events, meter.Gave, 500)
	closeWindow(nodes, t0.Add(window+time.Millisecond))
	for _, n := range nodes {
		if rs, _ := n.s.Receipts(n.key.DID()); len(rs) != 0 {
			t.Fatalf("a receipt was co-signed for a disputed window")
		}
	}
	// The next windows are honest; the dispute period of the first ends.
	for w := 2; w <= 4; w++ {
		traffic(x, y, 1, 10)
		closeWindow(nodes, t0.Add(time.Duration(w)*window+time.Millisecond))
	}
	for _, n := range nodes {
		n.s.Round(context.Background(), t0.Add(9*window))
		rs, _ := n.s.Receipts(n.key.DID())
		if len(rs) != 3 || rs[0].Seq != 1 || rs[0].WindowStart != t0.Unix()+10 {
			t.Fatalf("after the dispute: %d receipts, the first for window %d", len(rs), rs[0].WindowStart)
		}
		if _, err := receipt.VerifyChain(n.key.DID(), rs); err != nil {
			t.Fatal(err)
		}
		reps, _ := n.s.Reports(n.key.DID())
		var disputed *receipt.Receipt
		for _, rep := range reps {
			if rep.WindowStart == t0.Unix() {
				if len(rep.Receipts) != 0 || len(rep.Disputed) != 1 {
					t.Fatalf("report of the disputed window: %d receipts, %d disputed", len(rep.Receipts), len(rep.Disputed))
				}
				disputed, _ = receipt.Decode(rep.Disputed[0])
			}
		}
		if disputed == nil || !disputed.Disputed {
			t.Fatal("the disputed window is not in the report")
		}
		// Both sides' figures are in it.
		if disputed.Side(y.key.DID()).Gave.Events != 500 || disputed.Side(x.key.DID()).Gave.Events != 10 {
			t.Fatalf("disputed receipt figures: %+v / %+v", disputed.CountsA, disputed.CountsB)
		}
	}
}

// TestRestartMidExchangeLosesNothing stops the exchange where b misses
// the countersignature (a stored, b did not) and restarts b: a's next
// round delivers it, the chain continues one receipt per window and both
// sides hold the same chain. (The kill -9 loop in e2e covers the other
// points.)
func TestRestartMidExchangeLosesNothing(t *testing.T) {
	cfg := testConfig()
	nodes, a, b := newPair(t, cfg)
	ctx := context.Background()
	dropCountersign := true
	wrap := func() {
		inner := b.s.handleReceipt
		b.ag.Register(exchange.PIURIReceipt, func(ctx context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
			if u.Message.Type == exchange.TypeCountersign && dropCountersign {
				return nil, problem(didcomm.CodeInternal, "lost")
			}
			return inner(ctx, u)
		})
	}
	wrap()
	traffic(a, b, 10, 100)
	closeWindow(nodes, t0.Add(window+time.Millisecond))
	// a stored the receipt; b holds only its signature.
	if ra, _ := a.s.Receipts(a.key.DID()); len(ra) != 1 {
		t.Fatalf("a holds %d receipts", len(ra))
	}
	if rb, _ := b.s.Receipts(b.key.DID()); len(rb) != 0 {
		t.Fatal("b stored a receipt it never got countersigned")
	}
	// b restarts; the countersignature goes through on a's next round.
	b.close()
	b.openAt(t, cfg, t0.Add(window+2*time.Millisecond))
	dropCountersign = false
	traffic(a, b, 3, 100)
	closeWindow(nodes, t0.Add(2*window+time.Millisecond))
	for _, n := range []*testNode{a, b} {
		rs, _ := n.s.Receipts(n.key.DID())
		if _, err := receipt.VerifyChain(n.key.DID(), rs); err != nil || len(rs) != 2 {
			t.Fatalf("%d receipts: %v", len(rs), err)
		}
	}
	// Window 3, run step by step.
	traffic(a, b, 4, 100)
	at := t0.Add(3*window + time.Millisecond)
	a.s.Round(ctx, at)
	b.s.Round(ctx, at)
	b.s.Round(ctx, at.Add(time.Millisecond))
	a.s.Round(ctx, at.Add(time.Millisecond)) // a saves its figures, proposes, stores
	ra, _ := a.s.Receipts(a.key.DID())
	rb, _ := b.s.Receipts(b.key.DID())
	if len(ra) != len(rb) {
		t.Fatalf("a holds %d receipts, b %d", len(ra), len(rb))
	}
	if _, err := receipt.VerifyChain(a.key.DID(), ra); err != nil {
		t.Fatal(err)
	}
	if ps, _ := a.s.ForkProofs(); len(ps) != 0 {
		t.Fatal("a fork appeared")
	}
}

// pendingOf is n's pending record of the window at start with peer, nil
// if none.
func pendingOf(t *testing.T, n *testNode, peer *testNode, start int64) *pending {
	t.Helper()
	var p *pending
	n.s.db.b.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bPending).Get(key(peer.key.DID(), uint64(start))); v != nil {
			p = new(pending)
			return json.Unmarshal(v, p)
		}
		return nil
	})
	return p
}

// TestStopMidWindowLosesNothing: a node stopped in the middle of a
// window saves what it counted so far, and restarted within the window
// adds the rest: the window is receipted with all of it, undisputed,
// whichever side of the pair stopped. Restarted after the window, it
// exchanges the part it saved. (Before the stop saved anything, the
// restarted side had only the second part, and the window was disputed.)
func TestStopMidWindowLosesNothing(t *testing.T) {
	for _, c := range []struct {
		name      string
		proposer  bool // the proposing side (a) stops, else b
		restartAt time.Duration
		after     uint64 // events given after the restart, in the window
	}{
		{"b restarts within the window", false, window / 2, 3},
		{"a restarts within the window", true, window / 2, 3},
		{"b restarts after the window", false, window + window/2, 0},
		{"a restarts after the window", true, window + window/2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			nodes, a, b := newPair(t, cfg)
			stops := b
			if c.proposer {
				stops = a
			}
			traffic(a, b, 10, 100)
			stops.close()
			stops.openAt(t, cfg, t0.Add(c.restartAt))
			traffic(a, b, c.after, 100)
			// The other side has closed the window; the restarted side
			// does not exchange a window it saved part of before that
			// window has closed here too.
			other := map[bool]*testNode{true: b, false: a}[c.proposer]
			other.s.Round(context.Background(), t0.Add(window+time.Millisecond))
			other.s.Round(context.Background(), t0.Add(window+2*time.Millisecond))
			stops.s.Round(context.Background(), t0.Add(c.restartAt))
			if c.restartAt < window {
				for _, n := range nodes {
					if rs, _ := n.s.Receipts(n.key.DID()); len(rs) != 0 {
						t.Fatal("a window was receipted before it closed at the restarted side")
					}
					peer := map[bool]*testNode{true: b, false: a}[n == a]
					if p := pendingOf(t, n, peer, t0.Unix()); p == nil || p.Rounds != 0 || p.Theirs != nil {
						t.Fatalf("the window was exchanged before it closed at the restarted side: %+v", p)
					}
				}
			}
			closeWindow(nodes, t0.Add(max(window, c.restartAt)+time.Millisecond))
			closeWindow(nodes, t0.Add(max(window, c.restartAt)+time.Second))
			for _, n := range nodes {
				rs, _ := n.s.Receipts(n.key.DID())
				if len(rs) != 1 {
					ds, _ := n.s.Disputes()
					t.Fatalf("%d receipts (disputes %+v), want the window's one", len(rs), ds)
				}
				if got := rs[0].Side(b.key.DID()).Received.Events; got != 10+c.after || rs[0].Side(a.key.DID()).Gave.Events != 10+c.after {
					t.Fatalf("the window's receipt: %+v / %+v, want %d events both sides", rs[0].CountsA, rs[0].CountsB, 10+c.after)
				}
			}
		})
	}
}

// TestRefusedWindowIsDisputed: a window this node refuses (it caught the
// peer cheating in it) is never co-signed, and is reported disputed with
// the finding at the end of its dispute period, whichever side of the
// pair refuses, whether the peer's figures match this node's or the peer
// counted nothing at all and stays silent.
func TestRefusedWindowIsDisputed(t *testing.T) {
	for _, c := range []struct {
		name     string
		proposer bool // the refusing side is the proposer (a)
		traffic  bool // matching figures on both sides; else none at all
	}{
		{"a refuses, figures match", true, true},
		{"b refuses, figures match", false, true},
		{"a refuses, the peer silent", true, false},
		{"b refuses, the peer silent", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			nodes, a, b := newPair(t, cfg)
			refuser, other := b, a
			if c.proposer {
				refuser, other = a, b
			}
			if c.traffic {
				traffic(other, refuser, 10, 100)
			}
			if err := refuser.s.Refuse(other.key.DID(), "caught"); err != nil {
				t.Fatal(err)
			}
			if err := refuser.s.Refuse(refuser.key.DID(), "self"); err == nil {
				t.Fatal("a node refused a window with itself")
			}
			for w := 1; w <= 4; w++ {
				closeWindow(nodes, t0.Add(time.Duration(w)*window+time.Millisecond))
			}
			for _, n := range nodes {
				for _, r := range mustReceipts(t, n) {
					if r.WindowStart == t0.Unix() {
						t.Fatal("the refused window was co-signed")
					}
				}
			}
			ds, err := refuser.s.Disputes()
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || ds[0].WindowStart != t0.Unix() || len(ds[0].Findings) == 0 || ds[0].Findings[0] != "refused: caught" {
				t.Fatalf("the refusing side's disputes: %+v, want the window, refused: caught", ds)
			}
			reps, _ := refuser.s.Reports(refuser.key.DID())
			var reported bool
			for _, rep := range reps {
				reported = reported || rep.WindowStart == t0.Unix() && len(rep.Disputed) == 1
			}
			if !reported {
				t.Fatal("the refused window is not reported disputed")
			}
		})
	}
}

// mustReceipts is n's receipts with every peer.
func mustReceipts(t *testing.T, n *testNode) []*receipt.Receipt {
	t.Helper()
	rs, err := n.s.Receipts(n.key.DID())
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestGrantOfferEnforceRevoke(t *testing.T) {
	cfg := testConfig()
	nodes := newNodes(t, 2, cfg, nil)
	x, y := nodes[0], nodes[1]
	ctx := context.Background()
	g, err := x.s.Offer(ctx, y.key.DID(), meter.Events, 5, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.State != StateActive || g.SigGrantee == nil {
		t.Fatalf("offered grant is %s", g.State)
	}
	ys, _ := y.s.Grants()
	if len(ys) != 1 || ys[0].Direction != "received" || ys[0].State != StateActive {
		t.Fatalf("y's grants: %+v", ys)
	}
	if err := x.s.Allow(y.h.ID(), meter.Events, 5); err != nil {
		t.Fatalf("within quota: %v", err)
	}
	x.s.meter.Record(y.h.ID(), meter.Events, meter.Gave, 5)
	err = x.s.Allow(y.h.ID(), meter.Events, 1)
	if err == nil || !strings.Contains(err.Error(), g.ID) || !strings.HasPrefix(err.Error(), "rate-limited:") {
		t.Fatalf("over quota: %v, want a refusal naming grant %s", err, g.ID)
	}
	var m dto.Metric
	x.s.m.grantRefusals.WithLabelValues("events", "over_quota").Write(&m)
	if n := m.GetCounter().GetValue(); n != 1 {
		t.Fatalf("refusals counted: %v, want 1", n)
	}
	if _, err := x.s.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	ys, _ = y.s.Grants()
	if ys[0].State != StateRevoked {
		t.Fatalf("after revocation y sees %s", ys[0].State)
	}
	// With grants required, a peer without one is refused.
	cfg.RequireGrant = []meter.Service{meter.Events}
	x.close()
	x.open(t, cfg)
	if err := x.s.Allow(y.h.ID(), meter.Events, 1); err == nil || !strings.HasPrefix(err.Error(), "restricted:") {
		t.Fatalf("no grant: %v", err)
	}
}

// TestForkProofReachesEveryNode: two validly co-signed receipts for one
// pair and seq reach one node of a 50-node mesh; the proof it builds
// reaches every node, and each verifies it.
func TestForkProofReachesEveryNode(t *testing.T) {
	const count = 50
	nodes := newNodes(t, count, testConfig(), func(mn mocknet.Mocknet) error {
		// A ring with chords: connected, few links per node.
		ps := mn.Peers()
		for i := range ps {
			for _, j := range []int{(i + 1) % len(ps), (i + 7) % len(ps)} {
				if _, err := mn.ConnectPeers(ps[i], ps[j]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	ka, _ := identity.GenerateKey()
	kb, _ := identity.GenerateKey()
	if ka.DID() > kb.DID() {
		ka, kb = kb, ka
	}
	mk := func(events uint64) []byte {
		r := receipt.New(ka.DID(), kb.DID(), t0.Unix(), 10, 1, cid.Undef, receipt.Side{Gave: receipt.Counts{Events: events}}, receipt.Side{Received: receipt.Counts{Events: events}})
		r.Sign(ka)
		r.Sign(kb)
		raw, _ := r.Encode()
		return raw
	}
	if ok, err := nodes[0].s.Ingest(mk(10)); !ok || err != nil {
		t.Fatalf("first receipt: %v %v", ok, err)
	}
	if _, err := nodes[0].s.Ingest(mk(99)); err == nil || !strings.Contains(err.Error(), "fork proof") {
		t.Fatalf("second receipt: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		missing := 0
		for _, n := range nodes {
			ps, err := n.s.ForkProofs()
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != 1 {
				missing++
				continue
			}
			x, y, err := ps[0].Verify()
			if err != nil || x.Seq != 1 || y.Seq != 1 {
				t.Fatalf("a stored proof does not verify: %v", err)
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d nodes lack the fork proof", missing, count)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGrantDeclineAndExpiry: a node that accepts no grants declines an
// offer, which both sides keep as declined and which allows nothing; an
// accepted grant expires at its end on both sides, and then a service
// that requires a grant is refused.
func TestGrantDeclineAndExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.RequireGrant = []meter.Service{meter.Events}
	nodes := newNodes(t, 2, cfg, nil)
	x, y := nodes[0], nodes[1]
	ctx := context.Background()
	y.close()
	noGrants := cfg
	noGrants.AcceptGrants = false
	y.open(t, noGrants)
	g, err := x.s.Offer(ctx, y.key.DID(), meter.Events, 5, time.Hour, 0)
	if err != nil || g.State != StateDeclined || !strings.Contains(g.Declined, "accept_grants = false") {
		t.Fatalf("offer to a node that accepts none: %+v %v", g, err)
	}
	if err := x.s.Allow(y.h.ID(), meter.Events, 1); err == nil || !strings.HasPrefix(err.Error(), "restricted:") {
		t.Fatalf("a declined grant allowed service: %v", err)
	}
	y.close()
	y.open(t, cfg)
	g, err = x.s.Offer(ctx, y.key.DID(), meter.Events, 5, time.Hour, 0)
	if err != nil || g.State != StateActive {
		t.Fatalf("offer: %+v %v", g, err)
	}
	if err := x.s.Allow(y.h.ID(), meter.Events, 1); err != nil {
		t.Fatalf("active grant: %v", err)
	}
	later := func() time.Time { return time.Unix(g.End, 0).Add(time.Second) }
	x.s.now, y.s.now = later, later
	for _, n := range nodes {
		gs, _ := n.s.Grants()
		for _, gi := range gs {
			if gi.ID == g.ID && gi.State != StateExpired {
				t.Fatalf("past its end the grant is %s", gi.State)
			}
		}
	}
	if err := x.s.Allow(y.h.ID(), meter.Events, 1); err == nil || !strings.HasPrefix(err.Error(), "restricted:") {
		t.Fatalf("an expired grant allowed service: %v", err)
	}
}

// TestQueueGrant: a mediation_messages grant bounds the leaf's queue, and
// a forward past it is refused naming the grant and counted.
func TestQueueGrant(t *testing.T) {
	cfg := testConfig()
	nodes := newNodes(t, 2, cfg, nil)
	x, y := nodes[0], nodes[1]
	g, err := x.s.Offer(context.Background(), y.key.DID(), meter.MediationMessages, 2, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.s.AllowQueue(y.key.DID(), 1); err != nil {
		t.Fatalf("a second message in a queue of 2: %v", err)
	}
	err = x.s.AllowQueue(y.key.DID(), 2)
	if err == nil || !strings.Contains(err.Error(), "over grant "+g.ID) || !strings.Contains(err.Error(), "a queue of 2") {
		t.Fatalf("a third: %v", err)
	}
	var m dto.Metric
	x.s.m.grantRefusals.WithLabelValues("mediation_messages", "over_quota").Write(&m)
	if m.GetCounter().GetValue() != 1 {
		t.Fatal("the refusal was not counted")
	}
}

// A responder that signs its own figures inflated (what it gave, or what
// it received) gets no countersignature: the proposer, checking both
// sides against its own meter, counts a dispute round with the signed
// figures, stores no receipt, and reports the window disputed at the end.
func TestProposerRefusesInflatedSignature(t *testing.T) {
	for _, c := range []struct {
		name    string
		inflate func(*receipt.Side)
	}{
		{"gave", func(s *receipt.Side) { s.Gave.Events += 1000; s.Gave.Bytes += 300_000 }},
		{"received", func(s *receipt.Side) { s.Received.Bytes *= 10 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			nodes, a, b := newPair(t, cfg)
			// b answers a proposal with its own figures, inflated, signed.
			b.ag.Register(exchange.PIURIReceipt, func(ctx context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
				if u.Message.Type != exchange.TypePropose {
					return b.s.handleReceipt(ctx, u)
				}
				var body exchange.ProposeBody
				if err := json.Unmarshal(u.Message.Body, &body); err != nil {
					return nil, err
				}
				var mine receipt.Side
				b.s.db.b.View(func(tx *bolt.Tx) error {
					var p pending
					if v := tx.Bucket(bPending).Get(key(a.key.DID(), uint64(body.WindowStart))); v != nil && json.Unmarshal(v, &p) == nil {
						mine = p.Mine
					}
					return nil
				})
				c.inflate(&mine)
				r := exchange.Build(a.key.DID(), b.key.DID(), body, mine)
				if err := r.Sign(b.key); err != nil {
					return nil, err
				}
				raw, _ := r.Encode()
				out, err := didcomm.NewMessage(exchange.TypeSign, exchange.ReceiptBody{Receipt: raw})
				out.Thid = u.Message.ID
				return out, err
			})
			traffic(a, b, 10, 300)
			traffic(b, a, 5, 100)
			closeWindow(nodes, t0.Add(window+time.Millisecond))
			if rs, _ := a.s.Receipts(a.key.DID()); len(rs) != 0 {
				t.Fatalf("a countersigned %d receipts with inflated figures", len(rs))
			}
			a.s.db.b.View(func(tx *bolt.Tx) error {
				ps, _ := pendingFor(tx, b.key.DID())
				if len(ps) != 1 || ps[0].Rounds < 1 || ps[0].Theirs == nil || *ps[0].Theirs == ps[0].Mine {
					t.Errorf("a's pending window after the refused signature: %+v", ps)
				}
				return nil
			})
			a.s.Round(context.Background(), t0.Add(window+cfg.DisputePeriod.Duration+2*time.Second))
			if p, d := counted(t, a, b.key.DID()); p != 0 || d != 1 {
				t.Fatalf("after the dispute period: %d pending, %d disputed", p, d)
			}
			if rs, _ := a.s.Receipts(a.key.DID()); len(rs) != 0 {
				t.Fatal("a countersigned at the end of the dispute")
			}
		})
	}
}
