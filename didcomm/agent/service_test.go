package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/discoverfeatures"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/oob"
	"fleetmesh.org/fleetmesh/didcomm/problemreport"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/didcomm/trustping"
	"fleetmesh.org/fleetmesh/identity"
)

type peerNode struct {
	key      *identity.Key
	packer   *didcomm.Packer
	unpacker *didcomm.Unpacker
}

func newPeer(t *testing.T) *peerNode {
	t.Helper()
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := didcomm.SecretsFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return &peerNode{k, &didcomm.Packer{Secrets: s, Resolver: didcomm.DIDKeyResolver{}}, &didcomm.Unpacker{Secrets: s, Resolver: didcomm.DIDKeyResolver{}}}
}

func newService(t *testing.T, dir string) (*Service, *identity.Key) {
	t.Helper()
	k, _, err := identity.LoadOrCreateKey(dir + "/node.key")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(k, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

func httpExchange(url string) mediation.Exchange {
	return func(ctx context.Context, packed []byte) ([]byte, error) {
		out, err := transport.PostHTTP(ctx, http.DefaultClient, url, packed)
		if errors.Is(err, transport.ErrStatus) && out != nil {
			return out, nil // a problem report: let the caller read it
		}
		return out, err
	}
}

// ask sends m (authcrypt from p) and returns the unpacked answer.
func (p *peerNode) ask(t *testing.T, ex mediation.Exchange, m *didcomm.Message, mode didcomm.Mode) *didcomm.Unpacked {
	t.Helper()
	packed, err := p.packer.Pack(m, didcomm.PackOptions{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex(context.Background(), packed)
	if err != nil {
		t.Fatal(err)
	}
	if out == nil {
		return nil
	}
	got, err := p.unpacker.Unpack(out)
	if err != nil {
		t.Fatalf("answer: %v\n%s", err, out)
	}
	return got
}

func problemCodeOf(t *testing.T, u *didcomm.Unpacked) string {
	t.Helper()
	if u == nil {
		t.Fatal("no answer: a refusal must come with a problem report")
	}
	b, err := problemreport.Parse(u.Message)
	if err != nil {
		t.Fatalf("answer is %s, not a problem report", u.Message.Type)
	}
	return b.Code
}

func TestTrustPingAndFeaturesHTTP(t *testing.T) {
	svc, key := newService(t, t.TempDir())
	defer svc.Close()
	srv := httptest.NewServer(svc)
	defer srv.Close()
	ex := httpExchange(srv.URL + "/didcomm")
	alice := newPeer(t)

	ping, _ := trustping.NewPing(alice.key.DID(), key.DID())
	got := alice.ask(t, ex, ping, didcomm.ModeAuthcrypt)
	if !trustping.IsResponseTo(got.Message, ping.ID) || !got.Authenticated || got.Message.From != key.DID() {
		t.Fatalf("ping answered with %+v", got.Message)
	}

	q, _ := discoverfeatures.NewQueries(alice.key.DID(), key.DID(), discoverfeatures.Query{FeatureType: discoverfeatures.FeatureProtocol, Match: "https://didcomm.org/*"})
	got = alice.ask(t, ex, q, didcomm.ModeAuthcrypt)
	ds, err := discoverfeatures.Parse(got.Message)
	if err != nil {
		t.Fatal(err)
	}
	disclosed := map[string]bool{}
	for _, d := range ds {
		disclosed[d.ID] = true
	}
	for _, want := range []string{trustping.PIURI, discoverfeatures.PIURI, problemreport.PIURI, routing.PIURI, mediation.PIURIMediation, mediation.PIURIPickup, oob.PIURI} {
		if !disclosed[want] {
			t.Errorf("%s not disclosed (got %v)", want, ds)
		}
	}
	if v := discoverfeatures.Negotiate("https://didcomm.org/coordinate-mediation", Features(), ds); v != mediation.PIURIMediation {
		t.Errorf("negotiated %q", v)
	}

	// GET gives the invitation a phone pairs with.
	resp, err := http.Get(srv.URL + "/didcomm")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	inv, body, err := oob.Parse(buf.String())
	if err != nil || inv.From != key.DID() || body.Services[0].ServiceEndpoint.URI != srv.URL+"/didcomm" {
		t.Fatalf("invitation %s: %v", buf.String(), err)
	}
}

func TestProblemReports(t *testing.T) {
	svc, key := newService(t, t.TempDir())
	defer svc.Close()
	srv := httptest.NewServer(svc)
	defer srv.Close()
	url := srv.URL + "/didcomm"
	ex := httpExchange(url)
	alice, mallory := newPeer(t), newPeer(t)

	t.Run("unknown type", func(t *testing.T) {
		m, _ := didcomm.NewMessage("https://didcomm.org/tictactoe/1.0/move", nil)
		m.To = []string{key.DID()}
		got := alice.ask(t, ex, m, didcomm.ModeAuthcrypt)
		if c := problemCodeOf(t, got); c != didcomm.CodeUnsupportedType || got.Message.Pthid != m.ID || !got.Authenticated {
			t.Fatalf("code %s pthid %s", c, got.Message.Pthid)
		}
	})
	t.Run("pickup without grant", func(t *testing.T) {
		m, _ := didcomm.NewMessage(mediation.TypeStatusRequest, nil)
		m.To = []string{key.DID()}
		if c := problemCodeOf(t, alice.ask(t, ex, m, didcomm.ModeAuthcrypt)); c != didcomm.CodeUnauthorized {
			t.Fatalf("code %s", c)
		}
	})
	t.Run("mediation needs a proven sender", func(t *testing.T) {
		m, _ := didcomm.NewMessage(mediation.TypeMediateRequest, nil)
		m.To = []string{key.DID()}
		if c := problemCodeOf(t, alice.ask(t, ex, m, didcomm.ModeAnoncrypt)); c != didcomm.CodeUnauthorized {
			t.Fatalf("code %s", c)
		}
	})
	t.Run("forward for a DID not mediated", func(t *testing.T) {
		fwd, err := routing.Route(alice.packer, []byte(`{"ciphertext":"x"}`), newPeer(t).key.DID(), key.DID())
		if err != nil {
			t.Fatal(err)
		}
		out, err := transport.PostHTTP(context.Background(), http.DefaultClient, url, fwd)
		if !errors.Is(err, transport.ErrStatus) || !strings.Contains(string(out), didcomm.CodeUnauthorized) {
			t.Fatalf("%v %s", err, out)
		}
	})

	raw := func(t *testing.T, contentType string, body []byte) (int, string) {
		t.Helper()
		resp, err := http.Post(url, contentType, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		var m didcomm.Message
		if err := json.Unmarshal(b.Bytes(), &m); err != nil || m.Type != problemreport.Type {
			t.Fatalf("status %d answer %q is not a problem report", resp.StatusCode, b.String())
		}
		pb, _ := problemreport.Parse(&m)
		return resp.StatusCode, pb.Code
	}
	// A message claiming alice but authcrypted by mallory's key.
	claim, _ := didcomm.NewMessage(trustping.TypePing, nil)
	claim.From, claim.To = alice.key.DID(), []string{key.DID()}
	forged := forge(t, mallory, claim)
	pingOnce, _ := trustping.NewPing(alice.key.DID(), key.DID())
	packedPing, _ := alice.packer.Pack(pingOnce, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if _, err := ex(context.Background(), packedPing); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		status            int
		code              string
	}{
		{"garbage", didcomm.MediaTypeEncrypted, []byte("garbage"), 400, didcomm.CodeMalformed},
		{"wrong media type", "text/plain", []byte("{}"), 415, didcomm.CodeMalformed},
		{"sender key mismatch", didcomm.MediaTypeEncrypted, forged, 400, didcomm.CodeSenderMismatch},
		{"replay", didcomm.MediaTypeEncrypted, packedPing, 400, didcomm.CodeReplay},
		{"too big", didcomm.MediaTypeEncrypted, bytes.Repeat([]byte("a"), transport.MaxFrameBytes+1), 413, didcomm.CodeTooBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code := raw(t, tc.contentType, tc.body)
			if status != tc.status || code != tc.code {
				t.Fatalf("status %d code %s; want %d %s", status, code, tc.status, tc.code)
			}
		})
	}
}

// forge authcrypts m with sender's key-agreement key while m.From names
// someone else, as an attacker would: a Packer whose Secrets claim the
// victim's DID but hold the attacker's key.
func forge(t *testing.T, sender *peerNode, m *didcomm.Message) []byte {
	t.Helper()
	p := &didcomm.Packer{Secrets: &didcomm.Secrets{DID: m.From, Agreement: sender.packer.Secrets.Agreement}, Resolver: didcomm.DIDKeyResolver{}}
	out, err := p.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// restartable serves whichever Service is current, so a test can restart
// the node behind one URL.
type restartable struct {
	mu  sync.Mutex
	svc *Service
}

func (r *restartable) set(s *Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.svc = s
}

func (r *restartable) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	s := r.svc
	r.mu.Unlock()
	s.ServeHTTP(w, req)
}

func TestMediationSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	svc, key := newService(t, dir)
	front := &restartable{svc: svc}
	srv := httptest.NewServer(front)
	defer srv.Close()
	url := srv.URL + "/didcomm"
	leaf, sender := newPeer(t), newPeer(t)
	seen, err := mediation.OpenSeen(t.TempDir(), mediation.DefaultMaxSeen)
	if err != nil {
		t.Fatal(err)
	}
	defer seen.Close()
	client := &mediation.Client{Packer: leaf.packer, Unpacker: leaf.unpacker, Mediator: key.DID(), Exchange: httpExchange(url), Seen: seen}
	ctx := context.Background()
	routingDIDs, err := client.RequestMediation(ctx)
	if err != nil || len(routingDIDs) != 1 || routingDIDs[0] != key.DID() {
		t.Fatalf("grant %v %v", routingDIDs, err)
	}
	res, err := client.UpdateRecipients(ctx, mediation.Update{RecipientDID: leaf.key.DID(), Action: "add"})
	if err != nil || len(res) != 1 || res[0].Result != "success" {
		t.Fatalf("update %+v %v", res, err)
	}
	if rs, err := client.Recipients(ctx); err != nil || len(rs) != 1 || rs[0] != leaf.key.DID() {
		t.Fatalf("recipients %v %v", rs, err)
	}

	// The leaf is offline; a sender routes messages through the mediator.
	const n = 7
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		m, _ := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": fmt.Sprint("msg ", i)})
		m.To = []string{leaf.key.DID()}
		inner, err := sender.packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
		if err != nil {
			t.Fatal(err)
		}
		fwd, err := routing.Route(sender.packer, inner, leaf.key.DID(), routingDIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		out, err := transport.PostHTTP(ctx, http.DefaultClient, url, fwd)
		if err != nil || out != nil {
			t.Fatalf("forward %d: %v %s", i, err, out)
		}
		want[m.ID] = true
	}

	// The anchor restarts.
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	svc2, _ := newService(t, dir)
	defer svc2.Close()
	front.set(svc2)

	st, err := client.Status(ctx)
	if err != nil || st.MessageCount != n {
		t.Fatalf("status after restart %+v %v", st, err)
	}
	// The first collection fails part-way (the leaf's app crashes on the
	// third message), so that batch is not acknowledged and is delivered
	// again; Seen keeps the first two from reaching the app twice.
	got := map[string]int{}
	handle := func(fail int) func(string, []byte) error {
		calls := 0
		return func(id string, packed []byte) error {
			calls++
			if calls == fail {
				return errors.New("app crashed")
			}
			u, err := leaf.unpacker.Unpack(packed)
			if err != nil {
				return err
			}
			if u.Message.From != sender.key.DID() || !u.Authenticated {
				return fmt.Errorf("message from %s", u.Message.From)
			}
			got[u.Message.ID]++
			return nil
		}
	}
	if _, err := client.Collect(ctx, 3, handle(3)); err == nil {
		t.Fatal("collect did not report the crash")
	}
	if _, err := client.Collect(ctx, 3, handle(-1)); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("received %d distinct messages, want %d", len(got), n)
	}
	for id, c := range got {
		if c != 1 || !want[id] {
			t.Fatalf("message %s received %d times (sent: %v)", id, c, want[id])
		}
	}
	if st, err := client.Status(ctx); err != nil || st.MessageCount != 0 {
		t.Fatalf("queue not empty after pickup: %+v %v", st, err)
	}
	// Live delivery is not offered, and says so.
	m, _ := didcomm.NewMessage(mediation.TypeLiveDeliveryChange, map[string]bool{"live_delivery": true})
	m.To = []string{key.DID()}
	if c := problemCodeOf(t, leaf.ask(t, httpExchange(url), m, didcomm.ModeAuthcrypt)); c != mediation.CodeLiveModeNotSupported {
		t.Fatalf("code %s", c)
	}
}

func TestLibp2pBinding(t *testing.T) {
	svc, key := newService(t, t.TempDir())
	defer svc.Close()
	anchorHost, err := libp2p.New(libp2p.Identity(key.Libp2pKey()), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer anchorHost.Close()
	svc.AttachLibp2p(anchorHost)
	alice := newPeer(t)
	aliceHost, err := libp2p.New(libp2p.Identity(alice.key.Libp2pKey()), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer aliceHost.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := aliceHost.Connect(ctx, peer.AddrInfo{ID: anchorHost.ID(), Addrs: anchorHost.Addrs()}); err != nil {
		t.Fatal(err)
	}
	// The anchor's DID and PeerID are one key.
	if did, err := identity.DIDFromPeerID(anchorHost.ID()); err != nil || did != key.DID() {
		t.Fatalf("PeerID does not name the DID: %s %v", did, err)
	}
	ex := func(ctx context.Context, packed []byte) ([]byte, error) {
		return transport.SendLibp2p(ctx, aliceHost, anchorHost.ID(), packed)
	}
	ping, _ := trustping.NewPing(alice.key.DID(), key.DID())
	got := alice.ask(t, ex, ping, didcomm.ModeAuthcrypt)
	if !trustping.IsResponseTo(got.Message, ping.ID) {
		t.Fatalf("answer %+v", got.Message)
	}
	// Mediation over the stream protocol too.
	client := &mediation.Client{Packer: alice.packer, Unpacker: alice.unpacker, Mediator: key.DID(), Exchange: ex}
	if _, err := client.RequestMediation(ctx); err != nil {
		t.Fatal(err)
	}
	// A message the anchor cannot read still gets a report over libp2p.
	out, err := ex(ctx, []byte(`{"nonsense":true}`))
	if err != nil || !bytes.Contains(out, []byte(didcomm.CodeMalformed)) {
		t.Fatalf("%v %s", err, out)
	}
	// After Close the protocol is gone.
	svc.Close()
	if _, err := ex(ctx, []byte(`{}`)); err == nil {
		t.Fatal("stream protocol still served after Close")
	}
}

// TestRequestThroughSenderAndHandleFrom: Request sends through the Sender
// the node set (here straight into another Service's HandleFrom, as the
// node's iroh side does), and HandleFrom bounds one sender's messages in
// flight as the /didcomm endpoint bounds one address, while another
// sender still gets through.
func TestRequestThroughSenderAndHandleFrom(t *testing.T) {
	a, _ := newService(t, t.TempDir())
	defer a.Close()
	b, bKey := newService(t, t.TempDir())
	defer b.Close()
	l := DefaultLimits()
	l.MaxInFlightPerAddr = 1
	b.SetLimits(l)
	var sent []peer.ID
	a.SetSender(func(ctx context.Context, p peer.ID, packed []byte) ([]byte, error) {
		sent = append(sent, p)
		return b.HandleFrom(ctx, "iroh:alice", packed)
	})
	ping, _ := trustping.NewPing(a.DID(), bKey.DID())
	got, err := a.Request(context.Background(), bKey.DID(), ping)
	if err != nil || !trustping.IsResponseTo(got, ping.ID) {
		t.Fatalf("Request through the Sender: %+v %v", got, err)
	}
	if len(sent) != 1 || sent[0] != bKey.PeerID() {
		t.Fatalf("the Sender was asked for %v, want b's PeerID", sent)
	}

	// One message of "iroh:alice" in flight: a second is refused with
	// rate-limited, one from "iroh:bob" is not.
	release, refused, _ := b.limits.admit("iroh:alice")
	if release == nil {
		t.Fatalf("the first message of iroh:alice was refused (kind %d)", refused)
	}
	defer release()
	alice := newPeer(t)
	pingB, _ := trustping.NewPing(alice.key.DID(), bKey.DID())
	packed, err := alice.packer.Pack(pingB, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.HandleFrom(context.Background(), "iroh:alice", packed)
	var prob *didcomm.Problem
	if !errors.As(err, &prob) || prob.Code != didcomm.CodeRateLimited || !bytes.Contains(out, []byte(didcomm.CodeRateLimited)) {
		t.Fatalf("a second message in flight from one sender: %v %s", err, out)
	}
	if out, err := b.HandleFrom(context.Background(), "iroh:bob", packed); err != nil || len(out) == 0 {
		t.Fatalf("another sender was refused: %v", err)
	}
}

// TestCrossOrigin: a page on another origin may post to /didcomm (a
// browser leaf paired with a home by link), so the endpoint answers the
// CORS preflight and marks its answers readable from any origin.
func TestCrossOrigin(t *testing.T) {
	s, _ := newService(t, t.TempDir())
	for _, tc := range []struct {
		method string
		want   int
	}{
		{http.MethodOptions, http.StatusNoContent},
		{http.MethodGet, http.StatusOK},
		{http.MethodPut, http.StatusMethodNotAllowed},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tc.method, "http://home.example/didcomm", nil)
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		s.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.method, rec.Code, tc.want)
		}
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("%s: Access-Control-Allow-Origin %q", tc.method, got)
		}
	}
}
