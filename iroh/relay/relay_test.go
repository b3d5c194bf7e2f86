package relay

import (
	"bytes"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// testClient speaks the client side of the protocol, written from the same
// description as the server; the interop test checks both against iroh.
type testClient struct {
	t    *testing.T
	key  ed25519.PrivateKey
	id   [KeyLen]byte
	conn *websocket.Conn
}

func newKey(t *testing.T) (ed25519.PrivateKey, [KeyLen]byte) {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var id [KeyLen]byte
	copy(id[:], k.Public().(ed25519.PublicKey))
	return k, id
}

func dialRelay(t *testing.T, srv *httptest.Server, proto string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{proto}}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Sec-WebSocket-Protocol") != proto {
		t.Fatalf("negotiated %q, want %q", resp.Header.Get("Sec-WebSocket-Protocol"), proto)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// connect dials and authenticates; it returns the frame that ends the
// handshake.
func connect(t *testing.T, srv *httptest.Server, key ed25519.PrivateKey, proto string, corrupt bool) (*testClient, ServerFrame) {
	t.Helper()
	c := &testClient{t: t, key: key, conn: dialRelay(t, srv, proto)}
	copy(c.id[:], key.Public().(ed25519.PublicKey))
	ch := c.read()
	if ch.Type != FrameServerChallenge {
		t.Fatalf("first frame %d, want a challenge", ch.Type)
	}
	a := SignChallenge(key, ch.Challenge)
	if corrupt {
		a.Signature[0] ^= 1
	}
	c.write(AppendClientAuth(nil, a))
	return c, c.read()
}

func (c *testClient) read() ServerFrame {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	mt, msg, err := c.conn.ReadMessage()
	if err != nil {
		c.t.Fatal(err)
	}
	if mt != websocket.BinaryMessage {
		c.t.Fatalf("message type %d, want binary", mt)
	}
	f, err := DecodeServerFrame(msg)
	if err != nil {
		c.t.Fatalf("decode %x: %v", msg, err)
	}
	return f
}

// readType skips pings until a frame of type t.
func (c *testClient) readType(t FrameType) ServerFrame {
	c.t.Helper()
	for {
		f := c.read()
		if f.Type == t {
			return f
		}
		if f.Type != FramePing {
			c.t.Fatalf("frame %d, want %d", f.Type, t)
		}
	}
}

func (c *testClient) write(b []byte) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.BinaryMessage, b); err != nil {
		c.t.Fatal(err)
	}
}

func startRelay(t *testing.T, l Limits) (*Server, *httptest.Server) {
	s := New(l, nil)
	mux := http.NewServeMux()
	s.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); s.Close() })
	return s, srv
}

func TestForwardAndGone(t *testing.T) {
	s, srv := startRelay(t, Limits{})
	ka, _ := newKey(t)
	kb, _ := newKey(t)
	a, fa := connect(t, srv, ka, ProtocolV2, false)
	b, fb := connect(t, srv, kb, ProtocolV1, false)
	if fa.Type != FrameServerConfirmsAuth || fb.Type != FrameServerConfirmsAuth {
		t.Fatalf("handshake ended with %d, %d", fa.Type, fb.Type)
	}
	a.write(AppendClientDatagram(nil, b.id, 2, 0, []byte("hello b")))
	got := b.readType(FrameRelayToClientDatagram)
	if got.Src != a.id || got.ECN != 2 || string(got.Contents) != "hello b" {
		t.Fatalf("b got %+v", got)
	}
	batch := bytes.Repeat([]byte("x"), 30)
	b.write(AppendClientDatagram(nil, a.id, 0, 10, batch))
	got = a.readType(FrameRelayToClientBatch)
	if got.Src != b.id || got.SegmentSize != 10 || !bytes.Equal(got.Contents, batch) {
		t.Fatalf("a got %+v", got)
	}
	a.write(AppendPing(nil, FramePing, [8]byte{1, 2, 3}))
	if p := a.readType(FramePong); p.Data != [8]byte{1, 2, 3} {
		t.Fatalf("pong %x", p.Data)
	}
	st := s.Stats()
	if st.Clients != 2 || st.DatagramFrames != 2 || st.DatagramBytes != uint64(7+len(batch)) {
		t.Fatalf("stats %+v", st)
	}
	// b sent to a, so a's leaving is news to b.
	a.conn.Close()
	if g := b.readType(FrameEndpointGone); g.Gone != a.id {
		t.Fatalf("gone %x, want %x", g.Gone, a.id)
	}
}

func TestBadSignatureDenied(t *testing.T) {
	s, srv := startRelay(t, Limits{})
	k, _ := newKey(t)
	_, f := connect(t, srv, k, ProtocolV2, true)
	if f.Type != FrameServerDeniesAuth || f.Problem != "signature invalid" {
		t.Fatalf("got %+v, want a denial", f)
	}
	if st := s.Stats(); st.Refused != 1 || st.Accepted != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMaxClients(t *testing.T) {
	_, srv := startRelay(t, Limits{MaxClients: 1})
	k1, _ := newKey(t)
	k2, _ := newKey(t)
	if _, f := connect(t, srv, k1, ProtocolV2, false); f.Type != FrameServerConfirmsAuth {
		t.Fatalf("first client: %+v", f)
	}
	_, f := connect(t, srv, k2, ProtocolV2, false)
	if f.Type != FrameServerDeniesAuth || !strings.Contains(f.Problem, "relay_max_clients") {
		t.Fatalf("second client: %+v, want a denial naming relay_max_clients", f)
	}
	// The same endpoint again is a reconnect, not a new client.
	if _, f := connect(t, srv, k1, ProtocolV2, false); f.Type != FrameServerConfirmsAuth {
		t.Fatalf("reconnect: %+v", f)
	}
}

func TestSameEndpointReplaces(t *testing.T) {
	_, srv := startRelay(t, Limits{})
	k, _ := newKey(t)
	kp, _ := newKey(t)
	old, _ := connect(t, srv, k, ProtocolV2, false)
	cur, _ := connect(t, srv, k, ProtocolV2, false)
	if f := old.readType(FrameStatus); f.Status != StatusSameEndpointIDConnected {
		t.Fatalf("old connection status %d", f.Status)
	}
	p, _ := connect(t, srv, kp, ProtocolV2, false)
	p.write(AppendClientDatagram(nil, cur.id, 0, 0, []byte("to the newest")))
	if f := cur.readType(FrameRelayToClientDatagram); string(f.Contents) != "to the newest" {
		t.Fatalf("got %q", f.Contents)
	}
	cur.conn.Close()
	if f := old.readType(FrameStatus); f.Status != StatusHealthy {
		t.Fatalf("old connection status after the newer left: %d", f.Status)
	}
}

func TestHTTPErrorsAndProbes(t *testing.T) {
	_, srv := startRelay(t, Limits{})
	resp, err := http.Get(srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("plain GET %s: %d", Path, resp.StatusCode)
	}
	d := websocket.Dialer{Subprotocols: []string{"iroh-relay-v9"}}
	if _, resp, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+Path, nil); err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown version: err %v resp %v", err, resp)
	}
	resp, err = http.Get(srv.URL + ProbePath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("probe: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", srv.URL+NoContentPath, nil)
	req.Header.Set("X-Iroh-Challenge", "abc.1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Iroh-Response") != "response abc.1" {
		t.Fatalf("generate_204: %d %q", resp.StatusCode, resp.Header.Get("X-Iroh-Response"))
	}
}

func TestRateLimitSlowsSender(t *testing.T) {
	// A burst of one frame and a rate of 64 KiB/s: the relay still
	// forwards everything (it slows the reader, it drops nothing it has
	// read while the receiver keeps up).
	s, srv := startRelay(t, Limits{BytesPerSecond: 64 << 10, BurstBytes: 1})
	ka, _ := newKey(t)
	kb, _ := newKey(t)
	a, _ := connect(t, srv, ka, ProtocolV2, false)
	b, _ := connect(t, srv, kb, ProtocolV2, false)
	payload := bytes.Repeat([]byte{7}, 16<<10)
	for range 8 {
		a.write(AppendClientDatagram(nil, b.id, 0, 0, payload))
	}
	for i := range 8 {
		if f := b.readType(FrameRelayToClientDatagram); len(f.Contents) != len(payload) {
			t.Fatalf("datagram %d: %d bytes", i, len(f.Contents))
		}
	}
	if st := s.Stats(); st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func fixedKey() ([KeyLen]byte, ed25519.PrivateKey) {
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, 32))
	var id [KeyLen]byte
	copy(id[:], k.Public().(ed25519.PublicKey))
	return id, k
}
