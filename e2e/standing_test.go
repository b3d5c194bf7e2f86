package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-msgio"
	"github.com/multiformats/go-multiaddr"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/receipt"
)

// standingJSON is the part of `fleetmesh standing --json` these tests read.
type standingJSON struct {
	DID             string  `json:"did"`
	Standing        float64 `json:"standing"`
	VerifiedWindows int     `json:"verified_windows"`
	Counterparties  int     `json:"counterparties"`
}

func standingAt(t *testing.T, home string) map[string]standingJSON {
	t.Helper()
	out, errOut, err := cli(t, "standing", "--home", home, "--json")
	if err != nil {
		t.Fatalf("fleetmesh standing: %v\n%s", err, errOut)
	}
	var es []standingJSON
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		t.Fatalf("fleetmesh standing --json printed %q: %v", out, err)
	}
	m := map[string]standingJSON{}
	for _, e := range es {
		m[e.DID] = e
	}
	return m
}

// TestStandingFromVerifiedWindows: three node processes with 2-second
// windows exchange events; each then gives the other two standing from
// verified windows (`fleetmesh standing --json`: did, standing,
// verified_windows), and /metrics counts the recomputations. Then a
// newcomer joins with no standing anywhere: it can still publish (its
// event reaches the three) and sync (it gets an event published before
// it joined), within the default limits.
func TestStandingFromVerifiedWindows(t *testing.T) {
	cfg := accountingConfig + "\n[standing]\nrecompute = '2s'\nwalks = 2000\n"
	homes := []string{newHome(t, cfg), newHome(t, cfg), newHome(t, cfg)}
	x := startMeshNode(t, homes[0])
	y := startMeshNode(t, homes[1], x.mesh)
	// The third dials both, so that every pair serves the other directly
	// and has receipts of its own: standing between two nodes joined only
	// through x would wait on x's published reports instead.
	nodes := []*meshNode{x, y, startMeshNode(t, homes[2], x.mesh, y.mesh)}
	for i, n := range nodes {
		n.did = runID(t, homes[i]).DID
	}
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for w := range 3 {
		for i, n := range nodes {
			ids = append(ids, publishAt(t, n, u, fmt.Sprintf("standing %d %d", w, i)))
		}
		waitEverywhere(t, "events", nodes, ids)
	}
	deadline := time.Now().Add(150 * time.Second)
	for i, n := range nodes {
		for {
			view := standingAt(t, homes[i])
			ok := true
			for _, o := range nodes {
				if o != n && (view[o.did].Standing <= 0 || view[o.did].VerifiedWindows < 1) {
					ok = false
				}
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d's view: %+v\n%s", i, view, n.output())
			}
			time.Sleep(time.Second)
		}
	}
	out, _, err := cli(t, "standing", "--home", homes[0], "--of", nodes[1].did)
	if err != nil {
		t.Fatalf("fleetmesh standing --of: %v", err)
	}
	t.Logf("fleetmesh standing --of:\n%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fams, err := metrics(ctx, x.node)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sample(fams, "fleetmesh_standing_recomputations_total", "", ""); !ok || v < 1 {
		t.Fatalf("fleetmesh_standing_recomputations_total = %v (%v)", v, ok)
	}

	nh := newHome(t, cfg)
	newcomer := startMeshNode(t, nh, x.mesh)
	newcomer.did = runID(t, nh).DID
	for i := range nodes {
		if s := standingAt(t, homes[i])[newcomer.did].Standing; s != 0 {
			t.Fatalf("node %d gives the newcomer standing %v before it served anything", i, s)
		}
	}
	waitEverywhere(t, "the newcomer's event", nodes, []string{publishAt(t, newcomer, u, "newcomer")})
	waitEverywhere(t, "an event from before the newcomer joined", []*meshNode{newcomer}, ids[:1])
}

// TestStandingSybilPairGainsNothing: three node processes with 2-second
// windows exchange events and give each other standing. A fourth node
// and a fresh identity of its own (a fifth process, the Sybil) bootstrap
// only to each other and exchange events: they co-sign receipts and
// report their windows, but never serve the three. Their records then
// reach the three the way any node's do (spec/receipts.md "Publication
// and fetching": any peer answers for any node): a peer holding the
// fourth node's reports, which serves no events, connects to the three,
// and each operator runs `fleetmesh receipts --node` (fetch=1). Each of
// the three then holds the pair's verified windows (verified_windows > 0
// in `fleetmesh standing --json`) and still gives both standing exactly
// 0: walks start at the computing node and follow edges to the nodes
// that served it, and no node with standing there was ever served by
// either, so no walk reaches them (spec/standing.md "Walks"). Zero, not
// just below the trusted threshold, because no path leads to them at all.
// Last, node 0 chooses a mediator between the fourth node (listed
// first) and node 1 (`fleetmesh didcomm mediate --mediator A,B`): the
// one with standing there, node 1, mediates; the Sybil's node, given
// node 1 first, chooses the fourth, which has standing there.
func TestStandingSybilPairGainsNothing(t *testing.T) {
	cfg := accountingConfig + "\n[standing]\nrecompute = '2s'\nwalks = 2000\n"
	homes := []string{newHome(t, cfg), newHome(t, cfg), newHome(t, cfg)}
	x := startMeshNode(t, homes[0])
	y := startMeshNode(t, homes[1], x.mesh)
	// As in TestStandingFromVerifiedWindows: the third dials both, so
	// every pair of the three serves the other directly and holds
	// receipts of its own.
	nodes := []*meshNode{x, y, startMeshNode(t, homes[2], x.mesh, y.mesh)}
	for i, n := range nodes {
		n.did = runID(t, homes[i]).DID
	}
	// The Sybil pair: the fresh identity first, the fourth node
	// bootstrapping to it alone.
	sybilHome, fourthHome := newHome(t, cfg), newHome(t, cfg)
	sybil := startMeshNode(t, sybilHome)
	fourth := startMeshNode(t, fourthHome, sybil.mesh)
	sybil.did, fourth.did = runID(t, sybilHome).DID, runID(t, fourthHome).DID
	pair := []*meshNode{fourth, sybil}

	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	for w := range 3 {
		var ids, sids []string
		for i, n := range nodes {
			ids = append(ids, publishAt(t, n, u, fmt.Sprintf("honest %d %d", w, i)))
		}
		for i, n := range pair {
			sids = append(sids, publishAt(t, n, u, fmt.Sprintf("sybil %d %d", w, i)))
		}
		waitEverywhere(t, "honest events", nodes, ids)
		waitEverywhere(t, "the Sybil pair's events", pair, sids)
	}
	// Both sides of the pair have co-signed receipts and reports.
	deadline := time.Now().Add(90 * time.Second)
	for len(receipts(t, fourthHome, fourth.did)) == 0 || len(receipts(t, sybilHome, sybil.did)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the Sybil pair co-signed no receipt\n%s", fourth.output())
		}
		time.Sleep(time.Second)
	}
	for _, n := range pair {
		for len(reportedDisputed(t, n)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s reported no window\n%s", n.did, n.output())
			}
			time.Sleep(time.Second)
		}
	}
	for i := range nodes {
		for _, s := range pair {
			if held := receipts(t, homes[i], s.did); len(held) != 0 {
				t.Fatalf("node %d holds %d of %s's receipts before they were carried", i, len(held), s.did)
			}
		}
	}

	carrier := newCarrier(t, fourth)
	for i, n := range nodes {
		carrier.connect(t, n)
		// The operator asks for the fourth node's records (fetch=1):
		// the node asks its connected peers, the carrier among them.
		if held := receipts(t, homes[i], fourth.did); len(held) == 0 {
			t.Fatalf("node %d fetched none of the fourth node's receipts", i)
		}
		verifyReceipts(t, homes[i], fourth.did)
	}

	for i, n := range nodes {
		deadline := time.Now().Add(150 * time.Second)
		for {
			view := standingAt(t, homes[i])
			ok := view[fourth.did].VerifiedWindows > 0 && view[sybil.did].VerifiedWindows > 0
			for _, o := range nodes {
				if o != n && (view[o.did].Standing <= 0 || view[o.did].VerifiedWindows < 1) {
					ok = false
				}
			}
			if ok {
				for _, s := range pair {
					if view[s.did].Standing != 0 {
						t.Fatalf("node %d gives %s standing %v from receipts it co-signed with its own Sybil: %+v", i, s.did, view[s.did].Standing, view)
					}
				}
				t.Logf("node %d: fourth %+v, Sybil %+v", i, view[fourth.did], view[sybil.did])
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d's view: %+v\n%s", i, view, n.output())
			}
			time.Sleep(time.Second)
		}
	}

	// Mediator choice prefers standing: node 0 asks for mediation from
	// the fourth node, listed first, or node 1; node 1 has standing at
	// node 0 and the fourth none, so node 1 is asked first and mediates.
	// The Sybil's own node sees it the other way round (the fourth node
	// served it, node 1 never did) and, given node 1 first, chooses the
	// fourth: both grant mediation, so only standing tells them apart.
	for _, tc := range []struct {
		home, first, second string
		want                *meshNode
	}{
		{homes[0], fourth.httpURL(), nodes[1].httpURL(), nodes[1]},
		{sybilHome, nodes[1].httpURL(), fourth.httpURL(), fourth},
	} {
		out, errOut, err := cli(t, "didcomm", "mediate", "--home", tc.home, "--mediator", tc.first+"/didcomm,"+tc.second+"/didcomm")
		if err != nil {
			t.Fatalf("fleetmesh didcomm mediate --home %s: %v\n%s", tc.home, err, errOut)
		}
		var med struct {
			Mediator string `json:"mediator"`
		}
		if err := json.Unmarshal([]byte(out), &med); err != nil || med.Mediator != tc.want.did {
			t.Fatalf("%s chose mediator %q (%v), want %s\n%s", tc.home, med.Mediator, err, tc.want.did, out)
		}
	}
}

// carrier is a libp2p peer that holds one node's receipts and reports,
// read from that node's relay port, and answers the sync protocol's
// RECEIPTS frame with them (spec/mesh-sync.md "Receipts and reports"),
// as any peer may. It speaks nothing else: it carries no events, so it
// serves nobody and nobody serves it.
type carrier struct {
	h        host.Host
	node     string
	receipts []string // base64url, as the RECEIPT frame carries them
	reports  []string
}

func newCarrier(t *testing.T, of *meshNode) *carrier {
	t.Helper()
	_, h := newLoopbackHost(t)
	c := &carrier{h: h, node: of.did}
	var rs []receipt.JSON
	getAll(t, of.httpURL()+"/accounting/receipts", of.did, &rs)
	for _, r := range rs {
		c.receipts = append(c.receipts, r.Raw)
	}
	var reps []accounting.ReportJSON
	getAll(t, of.httpURL()+"/accounting/reports", of.did, &reps)
	for _, r := range reps {
		c.reports = append(c.reports, base64.RawURLEncoding.EncodeToString(r.Raw))
	}
	if len(c.receipts) == 0 || len(c.reports) == 0 || len(c.receipts) > receipt.MaxPageReceipts || len(c.reports) > receipt.MaxPageReports {
		t.Fatalf("the carrier holds %d receipts and %d reports of %s: want one page of each", len(c.receipts), len(c.reports), of.did)
	}
	h.SetStreamHandler(protocol.ID(meshsync.ProtocolID), c.serve)
	return c
}

// getAll reads every page of a paged /accounting endpoint into out (a
// pointer to a slice).
func getAll[T any](t *testing.T, endpoint, did string, out *[]T) {
	t.Helper()
	q := url.Values{"node": {did}}
	for {
		resp, err := http.Get(endpoint + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var page []T
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", endpoint, err)
		}
		*out = append(*out, page...)
		next := resp.Header.Get(accounting.NextHeader)
		if next == "" {
			return
		}
		q.Set("after", next)
	}
}

// serve answers RECEIPTS frames for the carried node with its one page,
// and anything else with CLOSED.
func (c *carrier) serve(s network.Stream) {
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	r, w := msgio.NewVarintReaderSize(s, meshsync.MaxFrameBytes), msgio.NewVarintWriter(s)
	for {
		b, err := r.ReadMsg()
		if err != nil {
			return
		}
		var parts []json.RawMessage
		var typ, sub string
		if json.Unmarshal(b, &parts) != nil || len(parts) < 2 || json.Unmarshal(parts[0], &typ) != nil || json.Unmarshal(parts[1], &sub) != nil {
			return
		}
		frame := func(v ...any) bool {
			out, err := json.Marshal(v)
			return err == nil && w.WriteMsg(out) == nil
		}
		var q struct {
			Node  string `json:"node"`
			After string `json:"after"`
		}
		if typ != "RECEIPTS" || len(parts) != 3 || json.Unmarshal(parts[2], &q) != nil || q.Node != c.node || q.After != "" {
			if !frame("CLOSED", sub, "unsupported: this peer only carries "+c.node+"'s records") {
				return
			}
			continue
		}
		for _, raw := range c.receipts {
			if !frame("RECEIPT", sub, raw) {
				return
			}
		}
		for _, raw := range c.reports {
			if !frame("REPORT", sub, raw) {
				return
			}
		}
		if !frame("EOSE", sub, map[string]string{"next": ""}) {
			return
		}
	}
}

// connect connects the carrier to n.
func (c *carrier) connect(t *testing.T, n *meshNode) {
	t.Helper()
	ai, err := peer.AddrInfoFromP2pAddr(multiaddr.StringCast(n.mesh))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.h.Connect(ctx, *ai); err != nil {
		t.Fatal(err)
	}
}
