package node

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/didcomm/trustping"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/iroh"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/mesh/peerexchange"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// irohNode is a whole node (node.Open) that reaches others over iroh only:
// its libp2p host listens nowhere and knows no peers, no DHT, no mDNS.
type irohNode struct {
	n    *Node
	key  *identity.Key
	stop func()
}

func startIrohNode(t *testing.T, peers []string) *irohNode {
	t.Helper()
	return startIrohNodeWith(t, func(c *config.Config) { c.Iroh.Peers = peers })
}

// startIrohNodeWith starts an irohNode whose config edit changes.
func startIrohNodeWith(t *testing.T, edit func(*config.Config)) *irohNode {
	t.Helper()
	helper, _ := filepath.Abs("../iroh/helper")
	if err := iroh.Check(iroh.Config{Node: "node", HelperDir: helper}); err != nil {
		t.Fatalf("%v (scripts/test.sh runs `npm install --no-save` in iroh/helper)", err)
	}
	n, key, stop := serveNode(t, irohTestLogLevel, func(cfg *config.Config) {
		cfg.Mesh.Listen = nil
		cfg.Mesh.SyncInterval = setting.DurationOf(500 * time.Millisecond)
		cfg.Iroh.HelperDir = helper
		cfg.Iroh.Bind = []string{"127.0.0.1:0"}
		edit(cfg)
	})
	in := &irohNode{n: n, key: key, stop: stop}
	if _, ok := n.Iroh(); !ok {
		t.Fatal("iroh does not serve")
	}
	return in
}

func (in *irohNode) peerString() string {
	info, _ := in.n.Iroh()
	for _, a := range info.Addrs {
		if strings.HasPrefix(a, "127.0.0.1:") {
			return info.ID + "@" + a
		}
	}
	return info.ID
}

func (in *irohNode) count(t *testing.T) int64 {
	n, _, err := in.n.Store().Count(context.Background(), &nostr.Filter{Kinds: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func publishNotes(t *testing.T, in *irohNode, k nostr.SecretKey, prefix string, count int) {
	t.Helper()
	for i := range count {
		if _, err := in.n.Relay().AddEvent(context.Background(), note(t, k, fmt.Sprintf("%s %d", prefix, i)), relay.FromClient); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIrohOnlySyncDIDCommAndKill9: two nodes whose libp2p cannot reach
// each other sync events both ways and exchange DIDComm messages over
// iroh only; then the first node's helper is killed with SIGKILL, it is
// restarted, the connection comes back and no event is lost.
func TestIrohOnlySyncDIDCommAndKill9(t *testing.T) {
	k, _ := nostr.GenerateSecretKey()
	a := startIrohNode(t, nil)
	publishNotes(t, a, k, "from a", 30)
	b := startIrohNode(t, []string{a.peerString()})
	publishNotes(t, b, k, "from b", 10)

	eventually(t, 60*time.Second, "both nodes hold all 40 events", func() bool { return a.count(t) == 40 && b.count(t) == 40 })
	for _, in := range []*irohNode{a, b} {
		if peers := in.n.Mesh().Host().Network().Peers(); len(peers) != 0 {
			t.Fatalf("libp2p connected to %v: the test must run over iroh only", peers)
		}
	}
	if st := b.n.IrohEndpoint().Stats(); st.StreamsOut == 0 {
		t.Fatal("b opened no iroh streams")
	}

	// A lookup from b reaches a over iroh: an event only a's store holds.
	only := note(t, k, "only on a")
	if _, err := a.n.Store().Save(context.Background(), only); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 20*time.Second)
	var found bool
	b.n.mesh.rounds.Lookup(lctx, &nostr.Filter{IDs: [][32]byte{only.ID}}, 1, func(ev *nostr.Event) { found = found || ev.ID == only.ID })
	lcancel()
	if !found {
		t.Fatal("b's lookup did not find the event a holds")
	}

	// DIDComm: b pings a over iroh, authcrypt both ways.
	secrets, err := didcomm.SecretsFromKey(b.key)
	if err != nil {
		t.Fatal(err)
	}
	packer := &didcomm.Packer{Secrets: secrets, Resolver: didcomm.DIDKeyResolver{}}
	unpacker := &didcomm.Unpacker{Secrets: secrets, Resolver: didcomm.DIDKeyResolver{}}
	ping, _ := trustping.NewPing(b.key.DID(), a.key.DID())
	packed, err := packer.Pack(ping, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := b.n.SendDIDComm(ctx, a.key.PeerID(), packed)
	if err != nil {
		t.Fatal(err)
	}
	got, err := unpacker.Unpack(out)
	if err != nil {
		t.Fatal(err)
	}
	if !trustping.IsResponseTo(got.Message, ping.ID) || !got.Authenticated || got.Message.From != a.key.DID() {
		t.Fatalf("answer %+v", got.Message)
	}

	// kill -9 of a's helper: a restarts it; events published meanwhile
	// and after reach b.
	pid := irohHelperPID(t, a.n.opts.Home.Path(IrohDir))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	publishNotes(t, a, k, "during restart", 10)
	eventually(t, 60*time.Second, "a's helper restarted", func() bool {
		_, up := a.n.Iroh()
		return up && a.n.IrohEndpoint().Stats().Restarts == 1
	})
	publishNotes(t, a, k, "after restart", 10)
	eventually(t, 90*time.Second, "b holds all 61 events after the restart", func() bool { return b.count(t) == 61 })
}

// irohHelperPID is the helper whose socket is in dir.
func irohHelperPID(t *testing.T, dir string) int {
	t.Helper()
	sock := "FLEETMESH_IROH_SOCK=" + filepath.Join(dir, "helper.sock") + "\x00"
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), sock) {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			return pid
		}
	}
	t.Fatal("no helper process found")
	return 0
}

// irohTestLogLevel is the nodes' log level in these tests; LevelDebug
// shows every sync session and dial.
var irohTestLogLevel = slog.LevelWarn

// TestIrohInteropJSSync: an unmodified @number0/iroh endpoint dials a
// node by its EndpointId over /fleetmesh/sync/1.0.0 and speaks the sync
// protocol's own frames: a REQ by id is answered with the EVENT and EOSE.
func TestIrohInteropJSSync(t *testing.T) {
	a := startIrohNode(t, nil)
	k, _ := nostr.GenerateSecretKey()
	ev := note(t, k, "for the js peer")
	if _, err := a.n.Relay().AddEvent(context.Background(), ev, relay.FromClient); err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal([]any{"REQ", "lookup", map[string]any{"ids": []string{ev.IDHex()}}})
	frame := binary.AppendUvarint(nil, uint64(len(req)))
	frame = append(frame, req...)
	id, addr, _ := strings.Cut(a.peerString(), "@")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	helper, _ := filepath.Abs("../iroh/helper")
	cmd := exec.CommandContext(ctx, "node", filepath.Join(helper, "interop", "peer.mjs"), "dial", id, addr, meshsync.ProtocolID, hex.EncodeToString(frame))
	cmd.Env = append(os.Environ(), "FLEETMESH_PEER_HEX=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("js peer: %v: %s", err, out)
	}
	var res struct{ Remote, Got string }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("js output %q: %v", out, err)
	}
	if res.Remote != a.key.EndpointID() {
		t.Fatalf("js peer reached %s, want %s", res.Remote, a.key.EndpointID())
	}
	raw, _ := hex.DecodeString(res.Got)
	var types []string
	for len(raw) > 0 {
		n, w := binary.Uvarint(raw)
		if w <= 0 || uint64(len(raw)-w) < n {
			t.Fatalf("bad frame in %x", raw)
		}
		var msg []json.RawMessage
		if err := json.Unmarshal(raw[w:w+int(n)], &msg); err != nil || len(msg) == 0 {
			t.Fatalf("frame %q: %v", raw[w:w+int(n)], err)
		}
		var typ string
		json.Unmarshal(msg[0], &typ)
		types = append(types, typ)
		if typ == "EVENT" {
			var got nostr.Event
			if err := json.Unmarshal(msg[2], &got); err != nil || got.ID != ev.ID {
				t.Fatalf("EVENT %s: %v", msg[2], err)
			}
		}
		raw = raw[w+int(n):]
	}
	if strings.Join(types, ",") != "EVENT,EOSE" {
		t.Fatalf("the node answered %v, want EVENT then EOSE", types)
	}
}

// TestIrohOnlyPeerExchangeRelayAndGrant: three nodes with libp2p
// disabled. b is an anchor; a and c name only b in [iroh] peers and no
// relay. Over iroh alone, a and c learn each other's descriptors through b
// (peer exchange) and connect; a takes b's relay from b's descriptor as
// its home relay; a's grant offer to c (an accounting exchange, through
// agent.Service.Request) is answered over iroh; and a's status shows the
// endpoint.
func TestIrohOnlyPeerExchangeRelayAndGrant(t *testing.T) {
	b := startIrohNodeWith(t, func(c *config.Config) { c.Class = config.ClassAnchor })
	a := startIrohNode(t, []string{b.peerString()})
	c := startIrohNode(t, []string{b.peerString()})
	cID := c.key.EndpointID()

	eventually(t, 90*time.Second, "a learns c's descriptor through b and connects to c over iroh", func() bool {
		_, learnt := a.n.mesh.m.PeerExchange().Info(c.key.PeerID())
		open, _ := a.n.IrohEndpoint().Connected(cID)
		return learnt && open
	})
	if _, ok := c.n.mesh.m.PeerExchange().Info(a.key.PeerID()); !ok {
		t.Error("c did not learn a's descriptor")
	}

	relayURL := irohRelayURL("", b.n.RelayURL())
	eventually(t, 60*time.Second, "a uses b's relay, learnt from b's descriptor", func() bool {
		info, _ := a.n.Iroh()
		return info.Relay != "" && slices.Contains(a.n.IrohEndpoint().Relays(), relayURL)
	})
	if b.n.irohRelay.Stats().Clients == 0 {
		t.Error("b's relay has no client")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := a.n.Accounting().Offer(ctx, c.key.DID(), meter.Events, 1000, time.Hour, time.Minute)
	if err != nil {
		t.Fatalf("grant offer from a to c over iroh: %v", err)
	}
	if g.Grant == nil || g.Grant.Grantee != c.key.DID() {
		t.Fatalf("grant %+v", g)
	}
	for _, in := range []*irohNode{a, b, c} {
		if peers := in.n.Mesh().Host().Network().Peers(); len(peers) != 0 {
			t.Fatalf("libp2p connected to %v: the test must run over iroh only", peers)
		}
	}
	a.n.iroh.mu.Lock()
	viaIroh := a.n.iroh.opened[[2]string{transportIroh, pathDirect}]
	a.n.iroh.mu.Unlock()
	if viaIroh == 0 {
		t.Error("a counted no stream over a direct iroh path")
	}

	st := a.n.status().Iroh
	if st.State != "up" || st.EndpointID != a.key.EndpointID() || len(st.Addrs) == 0 || st.RelayURL == "" || st.Connections["direct"] == 0 {
		t.Fatalf("a's status: iroh %+v", st)
	}
}

// TestIrohHostileEndpoint: an unmodified @number0/iroh endpoint opens 12
// connections and 160 streams to a node over the sync, peer exchange and
// DIDComm ALPNs and holds them. The node holds no more of its streams than the per-peer bound,
// never more stream sockets than its file budget's iroh share, scores the
// endpoint down and bans it; an honest peer syncs throughout.
func TestIrohHostileEndpoint(t *testing.T) {
	k, _ := nostr.GenerateSecretKey()
	a := startIrohNode(t, nil)
	b := startIrohNode(t, []string{a.peerString()})
	publishNotes(t, a, k, "before", 5)
	eventually(t, 60*time.Second, "b syncs with a before the attack", func() bool { return b.count(t) == 5 })

	ep := a.n.IrohEndpoint()
	lim := ep.Limits()
	id, addr, _ := strings.Cut(a.peerString(), "@")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	helper, _ := filepath.Abs("../iroh/helper")
	cmd := exec.CommandContext(ctx, "node", filepath.Join(helper, "interop", "hostile.mjs"), id, addr,
		strings.Join([]string{meshsync.ProtocolID, string(peerexchange.Protocol), string(transport.ProtocolID)}, ","), "12", "160", "8")
	cmd.Stderr = os.Stderr
	stop, done := make(chan struct{}), make(chan struct{})
	var maxOpen int
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			maxOpen = max(maxOpen, ep.Stats().OpenStreams)
			if _, err := a.n.Relay().AddEvent(context.Background(), note(t, k, fmt.Sprint("during ", i)), relay.FromClient); err != nil {
				t.Error(err)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	out, err := cmd.Output()
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("hostile.mjs: %v: %s", err, out)
	}
	var got struct {
		ID                     string
		Conns, ConnsClosed     int
		Held, Refused, Blocked int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("hostile.mjs printed %q: %v", out, err)
	}
	st := ep.Stats()
	t.Logf("attacker got %+v; node: open streams at most %d, refused %v", got, maxOpen, st.Refused)
	if got.Held > lim.StreamsPerPeer {
		t.Errorf("the attacker held %d streams open, the bound is %d per peer", got.Held, lim.StreamsPerPeer)
	}
	if maxOpen > lim.Streams {
		t.Errorf("%d stream sockets open, the file budget's iroh share is %d", maxOpen, lim.Streams)
	}
	// What the attacker is scored for first depends on how its
	// connections and streams interleave with the node's handlers: streams
	// over a per-peer bound (iroh_over_limit), or, when the handlers close
	// its streams as fast as it opens them (a loaded machine), the
	// protocols' own penalties (its peer exchanges come too often). Either
	// way it must be banned, and refusals over a bound must be scored;
	// each bound has its own test in the iroh package (TestStreamBounds).
	misb := a.n.Mesh().Stats().Misbehavior
	t.Logf("misbehaviour counted: %v", misb)
	attacker, err := iroh.PeerID(got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, banned := a.n.Mesh().Banned(attacker); !banned {
		t.Errorf("the attacker is not banned; misbehaviour %v", misb)
	}
	overBounds := st.Refused["peer_conns"] + st.Refused["peer_streams"] + st.Refused["protocol_streams"]
	if overBounds > 0 && misb[mesh.MisbehaviorIrohRefused] == 0 {
		t.Errorf("refusals %v over the per-peer bounds, and no %s penalty counted", st.Refused, mesh.MisbehaviorIrohRefused)
	}
	if overBounds == 0 && misb[mesh.MisbehaviorPEXFlood]+misb[mesh.MisbehaviorPEXViolation]+misb[mesh.MisbehaviorSyncViolation] == 0 {
		t.Errorf("refusals %v and misbehaviour %v: the attacker was neither refused over a bound nor penalized by a protocol", st.Refused, misb)
	}
	want := a.count(t)
	eventually(t, 60*time.Second, "b holds every event a took during the attack", func() bool { return b.count(t) == want })
}
