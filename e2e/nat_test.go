//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Addresses of the NAT lab. The home LANs are RFC 1918 space. The lab's
// "internet" is 192.0.0.128/26, inside 192.0.0.0/24, which RFC 6890 marks
// neither forwardable nor global, so it is nobody's real address; yet
// go-multiaddr counts it public, as AutoNAT, the relay and DCUtR need:
// go-libp2p only ever tests, relays to and hole-punches public addresses,
// and on RFC 1918 space all three stay idle. The namespaces have no link
// to the machine's network, so none of this traffic can leave them.
const (
	labAnchorIP = "192.0.0.130"
	labPrefix   = "/26"
	labRouterA  = "192.0.0.131"
	labRouterB  = "192.0.0.132"
	labLANA     = "10.77.1."
	labLANB     = "10.77.2."
	// labDelay is the one-way netem delay on every internet-facing link.
	labDelay = 20 * time.Millisecond
	// labRelayListen is each node's relay address, inside its namespace.
	labRelayListen = "127.0.0.1:7447"
	// natTestBudget bounds the whole traversal: reachability, relay
	// reservations, the connection between the homes, and the event.
	natTestBudget = 100 * time.Second
	// directGrace is how long, once the homes are connected through the
	// relay, the test waits for DCUtR to upgrade the connection.
	directGrace = 20 * time.Second
)

// natNodeConfig is a node's config in the lab: class auto (its class
// follows what AutoNAT finds), TCP and QUIC on fixed ports as a router's
// port forwarding or hole punching would use, short intervals, and no
// lookups, so that a REQ at home B finds the event only once it has been
// replicated to B.
const natNodeConfig = `class = "auto"

[relay]
events_per_second = 0
ip_events_per_second = 0

[store]
dir = "data"

[mesh]
listen = ["/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"]
maintain_interval = "1s"
sync_interval = "2s"
relay_search_interval = "1s"
lookup_peers = 0
`

// meshDebug is what a node's /debug/mesh serves (node.MeshDebug).
type meshDebug struct {
	PeerID       string   `json:"peer_id"`
	Class        string   `json:"class"`
	Reachability string   `json:"reachability"`
	RelayService bool     `json:"relay_service"`
	Relays       []string `json:"relays"`
	Connections  []struct {
		Peer    string `json:"peer"`
		Addr    string `json:"addr"`
		Relayed bool   `json:"relayed"`
	} `json:"connections"`
	Stats map[string]uint64 `json:"stats"`
}

// labNode is a fleetmesh process running in a lab namespace.
type labNode struct {
	*node
	ns     string
	peerID string
	lab    *netLab
}

func startLabNode(t *testing.T, lab *netLab, ns string, bootstrap ...string) *labNode {
	t.Helper()
	return startLabNodeWith(t, lab, ns, natNodeConfig, bootstrap...)
}

// startLabNodeWith is startLabNode with config as the node's config.toml.
func startLabNodeWith(t *testing.T, lab *netLab, ns, config string, bootstrap ...string) *labNode {
	t.Helper()
	home := newHome(t, config)
	id := runID(t, home)
	args := []string{"netns", "exec", ns, binary, "run", "--home", home, "--listen", labRelayListen, "--debug-mesh"}
	args = append(args, bootstrapFlags(bootstrap)...)
	n, err := startNodeCmd(t, home, exec.Command("ip", args...))
	if err != nil {
		t.Fatal(err)
	}
	return &labNode{node: n, ns: ns, peerID: id.PeerID, lab: lab}
}

// debug fetches the node's /debug/mesh from inside its namespace.
func (n *labNode) debug(ctx context.Context) (meshDebug, error) {
	return getMeshDebug(ctx, n.lab.httpClient(n.ns), "http://"+labRelayListen)
}

// getMeshDebug fetches base's /debug/mesh (a node started with
// --debug-mesh) with client.
func getMeshDebug(ctx context.Context, client *http.Client, base string) (meshDebug, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/mesh", nil)
	if err != nil {
		return meshDebug{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return meshDebug{}, err
	}
	defer resp.Body.Close()
	var d meshDebug
	if resp.StatusCode != http.StatusOK {
		return d, fmt.Errorf("/debug/mesh: %s", resp.Status)
	}
	return d, json.NewDecoder(resp.Body).Decode(&d)
}

// ws opens a WebSocket to the node's relay from inside its namespace.
func (n *labNode) ws(ctx context.Context) (*websocket.Conn, error) {
	d := websocket.Dialer{NetDialContext: n.lab.dialer(n.ns), HandshakeTimeout: 10 * time.Second}
	c, _, err := d.DialContext(ctx, "ws://"+labRelayListen, nil)
	return c, err
}

// serves asks the node's relay, from inside its namespace, for the event
// id: whether it serves it. The connection is closed when ctx ends, so a
// silent relay cannot hold the caller past it.
func (n *labNode) serves(ctx context.Context, id string) (bool, error) {
	c, err := n.ws(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	got, err := storedEvents(c, "serves", map[string]any{"ids": []string{id}})
	return err == nil && len(got) == 1 && got[0].ID == id, err
}

// publish signs a note with content as u and publishes it at n from
// inside its namespace, failing the test unless n accepts it; it returns
// the event's id.
func (n *labNode) publish(t *testing.T, u *user, content string) string {
	t.Helper()
	ev, err := u.sign(1, content, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	c, err := n.ws(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	ok, err := publishOne(c, ev)
	c.Close()
	if err != nil || !ok.Accepted {
		t.Fatalf("publish at %s: %+v %v", n.ns, ok, err)
	}
	return ev.ID
}

// waitServes polls n until it serves the event id, for at most budget;
// the test fails with the output of n and of others if it never does.
func (n *labNode) waitServes(t *testing.T, id string, budget time.Duration, others ...*labNode) {
	t.Helper()
	for deadline := time.Now().Add(budget); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok, err := n.serves(ctx, id)
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, o := range append([]*labNode{n}, others...) {
				fmt.Fprintf(&b, "--- %s:\n%s\n", o.ns, o.output())
			}
			t.Fatalf("%s never served %s (last: %v)\n%s", n.ns, id, err, b.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestNATTraversal runs real fleetmesh processes in a lab internet: an
// anchor with a public address and two home nodes, each behind its own NAT
// router (iptables MASQUERADE), with netem delay on the internet links.
// The homes know only the anchor. It checks that AutoNAT finds the anchor
// public (so, with class auto, it declares anchor and relays) and the homes
// private; that each home reserves a slot at the anchor's relay, learnt
// from its descriptor; that the homes reach each other, through the relay
// or directly once DCUtR punches through both NATs; and that an event
// published at one home arrives at the other. It reports which path the
// homes' connection took: both are valid outcomes.
func TestNATTraversal(t *testing.T) {
	needBinary(t)
	lab, anchorNS, homeA, homeB, netem := newNATLab(t)

	start := time.Now()
	deadline := start.Add(natTestBudget)
	anchor := startLabNode(t, lab, anchorNS)
	// The anchor's QUIC and TCP addresses, as an operator lists them.
	boot := []string{
		fmt.Sprintf("/ip4/%s/udp/4001/quic-v1/p2p/%s", labAnchorIP, anchor.peerID),
		fmt.Sprintf("/ip4/%s/tcp/4001/p2p/%s", labAnchorIP, anchor.peerID),
	}
	a := startLabNode(t, lab, homeA, boot...)
	b := startLabNode(t, lab, homeB, boot...)
	nodes := map[string]*labNode{"anchor": anchor, "home A": a, "home B": b}
	fail := func(format string, args ...any) {
		t.Helper()
		var sb strings.Builder
		for name, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			d, err := n.debug(ctx)
			cancel()
			js, _ := json.MarshalIndent(d, "", "  ")
			fmt.Fprintf(&sb, "=== %s (%s, %s): /debug/mesh (err %v):\n%s\n%s\n", name, n.ns, n.peerID, err, js, n.output())
		}
		t.Fatalf(format+"\n%s", append(args, sb.String())...)
	}
	// poll calls cond until it holds or the deadline passes.
	poll := func(what string, until time.Time, cond func(ctx context.Context) (bool, error)) {
		t.Helper()
		var last error
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ok, err := cond(ctx)
			cancel()
			if ok {
				return
			}
			if err != nil {
				last = err
			}
			if time.Now().After(until) {
				fail("%s: not within %s (last error: %v)", what, until.Sub(start).Round(time.Second), last)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	poll("AutoNAT finds the anchor public; with class auto it relays and declares anchor", deadline, func(ctx context.Context) (bool, error) {
		d, err := anchor.debug(ctx)
		return err == nil && d.Reachability == "public" && d.RelayService && d.Class == "anchor", err
	})
	for _, h := range []*labNode{a, b} {
		poll("AutoNAT finds "+h.ns+" private and it holds a reservation at the anchor's relay", deadline, func(ctx context.Context) (bool, error) {
			d, err := h.debug(ctx)
			return err == nil && d.Reachability == "private" && d.Class == "home" && slices.Contains(d.Relays, anchor.peerID), err
		})
	}
	t.Logf("reachability and relay reservations settled after %s", time.Since(start).Round(100*time.Millisecond))

	// The homes learn each other's relay address from their descriptors,
	// via the anchor, and connect: through the relay, and then directly
	// if hole punching works.
	conns := func(ctx context.Context) (relayed, direct []string, err error) {
		for _, pair := range [][2]*labNode{{a, b}, {b, a}} {
			d, err := pair[0].debug(ctx)
			if err != nil {
				return nil, nil, err
			}
			for _, c := range d.Connections {
				if c.Peer != pair[1].peerID {
					continue
				}
				if c.Relayed {
					relayed = append(relayed, c.Addr)
				} else {
					direct = append(direct, c.Addr)
				}
			}
		}
		return relayed, direct, nil
	}
	var connectedAt time.Time
	poll("the homes connect to each other (relayed or direct)", deadline, func(ctx context.Context) (bool, error) {
		r, d, err := conns(ctx)
		return len(r)+len(d) > 0, err
	})
	connectedAt = time.Now()
	var relayed, direct []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, d, err := conns(ctx)
		cancel()
		if err == nil {
			relayed, direct = r, d
		}
		if len(direct) > 0 || time.Since(connectedAt) > directGrace || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}

	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := u.sign(1, randomContent("across two NATs"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	c, err := a.ws(ctx)
	cancel()
	if err != nil {
		fail("connect to home A's relay: %v", err)
	}
	ok, err := publishOne(c, ev)
	c.Close()
	if err != nil || !ok.Accepted {
		fail("publish at home A: %+v %v", ok, err)
	}
	published := time.Now()
	poll("the event published at home A is served by home B", deadline, func(ctx context.Context) (bool, error) {
		return b.serves(ctx, ev.ID)
	})
	arrived := time.Since(published)

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	da, errA := a.debug(ctx)
	db, errB := b.debug(ctx)
	cancel()
	if errA != nil || errB != nil {
		fail("final /debug/mesh: %v %v", errA, errB)
	}
	path := "RELAYED through the anchor's circuit relay (hole punching did not succeed within " + directGrace.String() + ")"
	if len(direct) > 0 {
		path = "DIRECT (hole punched by DCUtR through both NATs)"
	}
	delay := fmt.Sprintf("netem %s one way on each internet link", labDelay)
	if !netem {
		delay = "no netem delay: the kernel lacks sch_netem"
	}
	report := fmt.Sprintf("NAT traversal: home A <-> home B connection is %s\n"+
		"  direct connections: %v\n  relayed connections: %v\n"+
		"  hole punches: home A %d ok / %d failed, home B %d ok / %d failed\n"+
		"  relay reservations: home A %d, home B %d\n"+
		"  homes connected %s after start; event arrived %s after publishing; %s",
		path, direct, relayed,
		da.Stats["hole_punch_successes"], da.Stats["hole_punch_failures"], db.Stats["hole_punch_successes"], db.Stats["hole_punch_failures"],
		da.Stats["relay_reservations"], db.Stats["relay_reservations"],
		connectedAt.Sub(start).Round(100*time.Millisecond), arrived.Round(10*time.Millisecond), delay)
	if len(direct) == 0 {
		report += "\n  why hole punching failed, from the homes' logs:" + holePunchLog(a.stderr.String()) + holePunchLog(b.stderr.String())
	}
	t.Log(report)
	fmt.Println(report)
}

// holePunchLog picks the last few hole punch lines from a node's log.
func holePunchLog(log string) string {
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "hole punch") {
			lines = append(lines, "\n    "+l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-3):], "")
}

// newNATLab builds the lab's topology: an internet bridge, an anchor on it
// with a public address, and two homes, each behind its own NAT router,
// with delay on the internet links where the kernel can add it. It
// returns the lab, the anchor's and homes' namespaces, and whether the
// delay is in place.
func newNATLab(t *testing.T) (lab *netLab, anchorNS, homeA, homeB string, netem bool) {
	t.Helper()
	lab, anchorNS, rtrA, rtrB, homeA, homeB := newNATTopology(t)
	netem = lab.delay(anchorNS, "eth0", labDelay)
	netem = lab.delay(rtrA, "wan0", labDelay) && netem
	netem = lab.delay(rtrB, "wan0", labDelay) && netem
	return lab, anchorNS, homeA, homeB, netem
}

// newNATTopology builds the NAT lab's namespaces and links (newNATLab
// without the delays): the anchor on the lab internet, and two homes each
// behind its own masquerading router.
func newNATTopology(t *testing.T) (lab *netLab, anchorNS, rtrA, rtrB, homeA, homeB string) {
	t.Helper()
	lab = newNetLab(t)
	inet := lab.addNS("inet")
	plug := lab.bridge(inet, "br0")
	anchorNS = lab.addNS("anchor")
	rtrA, rtrB = lab.addNS("rtra"), lab.addNS("rtrb")
	homeA, homeB = lab.addNS("homea"), lab.addNS("homeb")

	lab.veth(inet, "p-anchor", anchorNS, "eth0")
	plug("p-anchor")
	lab.addr(anchorNS, "eth0", labAnchorIP+labPrefix)
	for _, r := range []struct{ ns, port, wan, lan, home string }{
		{rtrA, "p-rtra", labRouterA, labLANA, homeA},
		{rtrB, "p-rtrb", labRouterB, labLANB, homeB},
	} {
		lab.veth(inet, r.port, r.ns, "wan0")
		plug(r.port)
		lab.addr(r.ns, "wan0", r.wan+labPrefix)
		lab.veth(r.ns, "lan0", r.home, "eth0")
		lab.addr(r.ns, "lan0", r.lan+"1/24")
		lab.addr(r.home, "eth0", r.lan+"2/24")
		lab.must("ip", "-n", r.home, "route", "add", "default", "via", r.lan+"1")
		lab.natRouter(r.ns, "wan0")
	}
	return lab, anchorNS, rtrA, rtrB, homeA, homeB
}
