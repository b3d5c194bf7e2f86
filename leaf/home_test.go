package leaf

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/didcomm/oob"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/dpop"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/store"
)

// testHome is a real home node's client-facing half, in process: the
// event store, the relay and the DIDComm agent (with its mediator) on one
// HTTP port, as node.Open wires them, without the mesh (a leaf never
// talks to it).
type testHome struct {
	t      testing.TB
	dir    string
	key    *identity.Key
	addr   string
	relCfg relay.Config

	st  *store.Store
	rl  *relay.Relay
	dc  *agent.Service
	srv *http.Server
	wg  sync.WaitGroup

	// acctWindow, when set, runs the home's accounting (as node.Open
	// wires it) with that window; acct is it while the home runs.
	acctWindow time.Duration
	acct       *accounting.Service
}

// newAccountingHome is a test home whose accounting runs with window.
func newAccountingHome(t testing.TB, window time.Duration) *testHome {
	t.Helper()
	return newHome(t, nil, window)
}

func newTestHome(t testing.TB, cfg func(*relay.Config)) *testHome {
	t.Helper()
	return newHome(t, cfg, 0)
}

// newHome starts a test home with relay config cfg and, for a window
// above zero, accounting.
func newHome(t testing.TB, cfg func(*relay.Config), window time.Duration) *testHome {
	t.Helper()
	key, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	rc := relay.DefaultConfig()
	rc.EventsPerSecond, rc.IPEventsPerSecond = 0, 0
	if cfg != nil {
		cfg(&rc)
	}
	h := &testHome{t: t, dir: t.TempDir(), key: key, addr: "127.0.0.1:0", relCfg: rc, acctWindow: window}
	h.start()
	t.Cleanup(h.stop)
	return h
}

// start opens the home on h.addr (the same port again after a stop).
func (h *testHome) start() {
	h.t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old socket may linger a moment
		if ln, err = net.Listen("tcp", h.addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	if h.st, err = store.Open(h.dir+"/data", store.Options{CacheBytes: 8 << 20}); err != nil {
		h.t.Fatal(err)
	}
	h.rl = relay.New(h.relCfg, h.st, nil, prometheus.NewRegistry())
	if h.dc, err = agent.New(h.key, h.dir+"/didcomm", nil); err != nil {
		h.t.Fatal(err)
	}
	// Tests queue hundreds of messages for one leaf at once, faster than
	// the default per-recipient forward rate.
	lim := agent.DefaultLimits()
	lim.RecipientPerSecond, lim.RecipientBurst = 1e6, 1e6
	lim.AddrRecipientPerSecond, lim.AddrRecipientBurst = 1e6, 1e6
	h.dc.SetLimits(lim)
	if h.acctWindow > 0 {
		m := meter.New(h.key.PeerID(), h.acctWindow, time.Now())
		cfg := accounting.Config{Window: setting.DurationOf(h.acctWindow), Tolerance: 0.02, Slack: 2, DisputePeriod: setting.DurationOf(h.acctWindow), LeafDisputePeriod: time.Hour}
		if h.acct, err = accounting.New(h.key, cfg, h.dir+"/accounting", m, h.dc, nil, prometheus.NewRegistry(), nil); err != nil {
			h.t.Fatal(err)
		}
		h.dc.SetMeter(m)
		h.acct.SetLeaves(h.dc.Mediates)
		h.acct.Start()
		// The relay meters a leaf's connection as node.Open has it do.
		v := &dpop.Verifier{Allow: func(did string) error {
			if !h.dc.Mediates(did) {
				return fmt.Errorf("this node does not mediate for %s", did)
			}
			return nil
		}}
		h.rl.Identify = v.Identify
		h.rl.Served = meter.RelayServed(m)
	}
	mux := http.NewServeMux()
	mux.Handle("/", h.rl)
	mux.Handle("/didcomm", h.dc)
	h.srv = &http.Server{Handler: mux}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		_ = h.srv.Serve(h.rl.Listener(ln))
	}()
}

func (h *testHome) stop() {
	if h.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = h.rl.Shutdown(ctx)
	_ = h.srv.Close()
	h.wg.Wait()
	if h.acct != nil {
		_ = h.acct.Close()
		h.acct = nil
	}
	_ = h.dc.Close()
	_ = h.st.Close()
	h.srv = nil
}

func (h *testHome) endpoint(addr string) string { return "http://" + addr + "/didcomm" }

// invitation is what `fleetmesh didcomm invite --endpoint` prints, for the
// endpoint at addr (the home's own address or a proxy's).
func (h *testHome) invitation(addr string) string {
	h.t.Helper()
	inv, err := oob.New(h.key.DID(), oob.GoalMediate, "test home", h.endpoint(addr))
	if err != nil {
		h.t.Fatal(err)
	}
	u, err := oob.URL(h.endpoint(addr), inv)
	if err != nil {
		h.t.Fatal(err)
	}
	return u
}

// sender is someone who writes to the leaf through its mediator.
type sender struct {
	key    *identity.Key
	packer *didcomm.Packer
}

func newSender(t testing.TB) *sender {
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := didcomm.SecretsFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return &sender{key: k, packer: &didcomm.Packer{Secrets: s, Resolver: didcomm.DIDKeyResolver{}}}
}

// queue forwards n basic messages to leaf through h's mediator and
// returns their ids.
func (h *testHome) queue(t testing.TB, s *sender, leafDID string, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		m, err := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": "hello"})
		if err != nil {
			t.Fatal(err)
		}
		m.From, m.To = s.key.DID(), []string{leafDID}
		inner, err := s.packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
		if err != nil {
			t.Fatal(err)
		}
		fwd, err := routing.Route(s.packer, inner, leafDID, h.key.DID())
		if err != nil {
			t.Fatal(err)
		}
		if out, err := h.dc.Handle(context.Background(), fwd); err != nil {
			t.Fatalf("forward %d: %v (%s)", i, err, out)
		}
		ids = append(ids, m.ID)
	}
	return ids
}

// signedEvents makes n kind-1 events by one author, one second apart
// from base. Only the last signed of them get a real signature: the
// others are what the leaf holds already, which nothing verifies again,
// and Schnorr signing under -race costs ~8 ms an event.
func signedEvents(t testing.TB, n int, base int64, signed int) []*nostr.Event {
	t.Helper()
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	sk, err := nostr.SecretKeyFromBytes(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*nostr.Event, n)
	for i := range out {
		ev := &nostr.Event{PubKey: sk.PubKey(), CreatedAt: base + int64(i), Kind: 1, Tags: nostr.Tags{}, Content: "event"}
		if i >= n-signed {
			if err := sk.Sign(ev); err != nil {
				t.Fatal(err)
			}
		} else {
			ev.ID = ev.ComputeID()
		}
		out[i] = ev
	}
	return out
}

// save stores events in the home's store, many at a time so the store's
// writer batches them.
func (h *testHome) save(t testing.TB, evs []*nostr.Event) {
	t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, len(evs))
	slots := make(chan struct{}, 64)
	for _, ev := range evs {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if _, err := h.st.Save(context.Background(), ev); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

// memKeys is a KeyStore in memory, as an app's Keychain adapter would be.
type memKeys struct{ seed []byte }

func (m *memKeys) Seed() ([]byte, error) {
	if m.seed == nil {
		s, err := NewSeed()
		if err != nil {
			return nil, err
		}
		m.seed = s
	}
	return m.seed, nil
}
