package announce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

func nodeKey(t testing.TB, seed byte) *identity.Key {
	t.Helper()
	k, err := identity.KeyFromSeed(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func announceKey(t testing.TB, seed byte) nostr.SecretKey {
	t.Helper()
	sk, err := nostr.SecretKeyFromBytes(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

// signed is k's descriptor listing addrs, valid from iat for a day.
func signed(t testing.TB, k *identity.Key, seq uint64, iat time.Time, addrs ...string) *descriptor.Signed {
	t.Helper()
	d := descriptor.Descriptor{
		DID: k.DID(), Class: descriptor.ClassHome, Seq: seq,
		IssuedAt: iat.Unix(), Expires: iat.Add(24 * time.Hour).Unix(),
		Addresses: descriptor.Addresses{Libp2p: addrs},
	}
	s, err := descriptor.Sign(k, d, descriptor.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func eventJSON(t testing.TB, ev *nostr.Event) []byte {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseEvent(t *testing.T) {
	now := time.Now()
	k, other := nodeKey(t, 1), nodeKey(t, 2)
	sk := announceKey(t, 3)
	addr := "/ip4/198.51.100.7/tcp/4001/p2p/" + k.PeerID().String()
	d := signed(t, k, 1, now, addr)
	mk := func(f func(*nostr.Event)) []byte {
		ev, err := NewEvent(sk, d, now.Unix())
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			f(ev)
			sk.Sign(ev)
		}
		return eventJSON(t, ev)
	}
	good := mk(nil)
	got, err := ParseEvent(good, now, descriptor.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if got.Descriptor.DID != k.DID() || got.CID != d.CID {
		t.Fatalf("got %+v", got.Descriptor)
	}
	// The content changed after the event was signed.
	tamperedEvent := bytes.Replace(good, []byte(`"content":"ey`), []byte(`"content":"ez`), 1)
	// The descriptor's payload changed and the event re-signed, as anyone
	// holding an announcement key can: the node's signature fails.
	jws := strings.Split(string(d.JWS), ".")
	payload := []byte(jws[1])
	payload[10] ^= 1
	tamperedDescriptor := mk(func(ev *nostr.Event) { ev.Content = jws[0] + "." + string(payload) + "." + jws[2] })
	// Another node's descriptor under this node's d tag.
	otherD := signed(t, other, 1, now, "/ip4/198.51.100.8/tcp/4001/p2p/"+other.PeerID().String())
	cases := []struct {
		name string
		raw  []byte
		now  time.Time
		want error
	}{
		{"tampered event", tamperedEvent, now, ErrBadEvent},
		{"tampered descriptor", tamperedDescriptor, now, descriptor.ErrBadSignature},
		{"other node's descriptor", mk(func(ev *nostr.Event) { ev.Content = string(otherD.JWS) }), now, ErrMismatch},
		{"d tag of another DID", mk(func(ev *nostr.Event) { ev.Tags[0][1] = other.DID() }), now, ErrMismatch},
		{"no expiration", mk(func(ev *nostr.Event) { ev.Tags = ev.Tags[:1] }), now, ErrMismatch},
		{"expiration not the descriptor's", mk(func(ev *nostr.Event) { ev.Tags[1][1] = "99999999999" }), now, ErrMismatch},
		{"no d tag", mk(func(ev *nostr.Event) { ev.Tags = ev.Tags[1:] }), now, ErrNotAnnouncement},
		{"wrong kind", mk(func(ev *nostr.Event) { ev.Kind = 30166 }), now, ErrNotAnnouncement},
		{"expired descriptor", good, now.Add(25 * time.Hour), descriptor.ErrExpired},
		{"content not a descriptor", mk(func(ev *nostr.Event) { ev.Content = "{}" }), now, descriptor.ErrMalformed},
		{"not JSON", []byte(`["EVENT"`), now, ErrNotAnnouncement},
		{"too large", append(bytes.Repeat([]byte(" "), MaxEventBytes), good...), now, ErrNotAnnouncement},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, err := ParseEvent(c.raw, c.now, descriptor.DefaultLimits()); !errors.Is(err, c.want) {
				t.Fatalf("ParseEvent = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestCheckRelayURL(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"wss://relay.example.org", true},
		{"wss://relay.example.org:444/nostr", true},
		{"ws://127.0.0.1:7447", true},
		{"ws://[::1]:7447", true},
		{"ws://localhost:7447", true},
		{"ws://relay.example.org", false},
		{"ws://192.168.1.2:7447", false},
		{"https://relay.example.org", false},
		{"wss://", false},
		{"wss://user:pw@relay.example.org", false},
		{"relay.example.org", false},
	} {
		if err := CheckRelayURL(c.url); (err == nil) != c.ok {
			t.Errorf("CheckRelayURL(%q) = %v, want ok %v", c.url, err, c.ok)
		}
	}
}

// testRelay is this module's relay on a loopback port: a Nostr relay that
// keeps addressable events as NIP-01 says. Its rate limits are off, since
// every client of the test shares one address and polls.
func testRelay(t *testing.T) string {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := relay.DefaultConfig()
	cfg.EventsPerSecond, cfg.IPEventsPerSecond, cfg.IPConnsPerSecond = 0, 0, 0
	cfg.ReqMillisPerSecond, cfg.ReqRowsPerSecond, cfg.IPReqMillisPerSecond, cfg.IPReqRowsPerSecond = 0, 0, 0, 0
	rl := relay.New(cfg, st, nil, nil)
	srv := httptest.NewServer(rl)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		rl.Shutdown(context.Background())
		st.Close()
	})
	return "ws://" + strings.TrimPrefix(srv.URL, "http://")
}

// TestAnnounceAndFind announces two nodes through Announcers, publishes
// junk and a forgery beside them, and finds exactly the two nodes, each
// at its newest descriptor.
func TestAnnounceAndFind(t *testing.T) {
	url := testRelay(t)
	now := time.Now()
	ka, kb := nodeKey(t, 1), nodeKey(t, 2)
	addrA := "/ip4/198.51.100.7/tcp/4001/p2p/" + ka.PeerID().String()
	addrA2 := "/ip4/198.51.100.7/udp/4001/quic-v1/p2p/" + ka.PeerID().String()
	addrB := "/ip4/198.51.100.8/tcp/4001"
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	annA, err := NewAnnouncer(announceKey(t, 3), []string{url}, log)
	if err != nil {
		t.Fatal(err)
	}
	annB, err := NewAnnouncer(announceKey(t, 4), []string{url}, log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	for _, a := range []*Announcer{annA, annB} {
		go func() { a.Run(ctx); done <- struct{}{} }()
	}
	annA.Set(signed(t, ka, 1, now, addrA))
	annB.Set(signed(t, kb, 1, now, addrB))
	// A forgery: B's d tag over a descriptor whose signature fails.
	bad := signed(t, kb, 9, now, addrB)
	// Change one signature character for another (never for itself: the
	// old 'AA' suffix was the signature's own one time in 256).
	bad.JWS = bytes.Clone(bad.JWS)
	if i := len(bad.JWS) - 2; bad.JWS[i] == 'A' {
		bad.JWS[i] = 'B'
	} else {
		bad.JWS[i] = 'A'
	}
	forged, err := NewEvent(announceKey(t, 5), bad, now.Unix())
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(ctx, url, forged); err != nil {
		t.Fatal(err)
	}
	// A changed address is announced at once, replacing the first.
	waitFound(t, url, ka.DID(), addrA)
	annA.Set(signed(t, ka, 2, now, addrA, addrA2))
	f := waitFound(t, url, ka.DID(), addrA2)
	f = waitFound(t, url, kb.DID(), addrB+"/p2p/"+kb.PeerID().String())
	if len(f.Descriptors) != 2 || f.Refused != 1 {
		t.Fatalf("found %s, want 2 nodes and the forgery refused", f)
	}
	boot := f.Bootstrap(kb.DID())
	if len(boot) != 2 || !strings.HasSuffix(boot[0], ka.PeerID().String()) {
		t.Fatalf("bootstrap leaving out B: %v", boot)
	}
	cancel()
	<-done
	<-done
}

// waitFound polls the relay until Find returns did listing addr.
func waitFound(t *testing.T, url, did, addr string) Found {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		f, err := Find(ctx, url, time.Now())
		cancel()
		if err == nil {
			for _, d := range f.Descriptors {
				for _, a := range f.Bootstrap("") {
					if d.Descriptor.DID == did && a == addr {
						return f
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never found at %s listing %s: %s, %v", did, url, addr, f, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFindRefusesPlainWS(t *testing.T) {
	if _, err := Find(context.Background(), "ws://relay.example.org", time.Now()); err == nil {
		t.Fatal("Find over ws:// to a non-loopback host")
	}
}

func FuzzParseEvent(f *testing.F) {
	now := time.Now()
	k := nodeKey(f, 1)
	d := signed(f, k, 1, now, "/ip4/198.51.100.7/tcp/4001")
	ev, err := NewEvent(announceKey(f, 3), d, now.Unix())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(eventJSON(f, ev))
	f.Add([]byte(`{"kind":31166,"tags":[["d","did:key:z6Mk"]],"content":"a.b.c"}`))
	f.Add([]byte(`{}`))
	lim := descriptor.DefaultLimits()
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := ParseEvent(raw, now, lim)
		if err != nil {
			return
		}
		// Only a verified descriptor comes out, and its DID is the d tag.
		var e nostr.Event
		if json.Unmarshal(raw, &e) != nil || e.DTag() != got.Descriptor.DID {
			t.Fatalf("accepted %q as %s", raw, got.Descriptor.DID)
		}
	})
}
