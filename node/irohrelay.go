package node

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/iroh/relay"
)

// relayLearnEvery is how often a node looks at the descriptors it holds
// for anchors' iroh relays: cheap, since peer exchange verified them
// already, and a changed list only is sent to the helper.
const relayLearnEvery = 5 * time.Second

// openIrohRelay mounts the iroh relay an anchor serves (spec/iroh.md,
// "Anchors as iroh relays") on the relay port's mux, unless [iroh]
// serve_relay is off. It answers only while the node's class is anchor,
// and the descriptor offers it then.
func openIrohRelay(opts Options, mp *meshPart, mux *http.ServeMux) *relay.Server {
	ic := opts.Config.Iroh
	if !ic.ServeRelay {
		return nil
	}
	srv := relay.New(relay.Limits{
		MaxClients: ic.RelayMaxClients, BytesPerSecond: ic.RelayBytesPerSecond,
		BurstBytes: ic.RelayBurstBytes, QueueFrames: ic.RelayQueueFrames,
	}, opts.Log)
	anchor := func() bool { return mp.self.class(mp.m.NATStatus()) == descriptor.ClassAnchor }
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !anchor() {
			http.Error(w, "error: this node is not an anchor now, so it serves no iroh relay", http.StatusNotFound)
			return
		}
		srv.ServeHTTP(w, r)
	})
	for _, p := range []string{relay.Path, relay.ProbePath, relay.NoContentPath} {
		mux.Handle(p, h)
	}
	l := srv.Limits()
	mp.self.irohRelay = func(class descriptor.Class, relayURL string) *descriptor.IrohRelayOffer {
		u := irohRelayURL(ic.RelayURL, relayURL)
		if class != descriptor.ClassAnchor || u == "" {
			return nil
		}
		return &descriptor.IrohRelayOffer{URL: u, MaxClients: uint64(l.MaxClients), BytesPerSecond: uint64(l.BytesPerSecond)}
	}
	return srv
}

// irohRelayURL is the iroh relay URL an anchor offers: [iroh] relay_url,
// else its Nostr relay URL with http(s) for ws(s) and the root path (iroh
// clients speak at /relay whatever the path).
func irohRelayURL(configured, nostrURL string) string {
	if configured != "" {
		return configured
	}
	u, err := url.Parse(nostrURL)
	if err != nil || u.Host == "" {
		return ""
	}
	switch u.Scheme {
	case "wss":
		u.Scheme = "https"
	case "ws":
		u.Scheme = "http"
	default:
		return ""
	}
	u.Path, u.RawQuery, u.Fragment = "/", "", ""
	return u.String()
}

// learnRelays hands the iroh endpoint [iroh] relays and up to max iroh
// relays of anchors whose verified descriptors peer exchange holds, as
// pickRelays chooses them. No relay is built in.
func (ip *irohPart) learnRelays(ctx context.Context, configured []string, max int) {
	ip.wg.Add(1)
	go func() {
		defer ip.wg.Done()
		periodic.Run(ctx, time.Second, relayLearnEvery, nil, func() {
			ip.ep.SetRelays(append(slices.Clone(configured), ip.anchorRelays(max)...))
		})
	}()
}

// anchorRelays are the relays pickRelays takes from the anchors' offers
// peer exchange holds.
func (ip *irohPart) anchorRelays(max int) []string {
	pex := ip.mp.m.PeerExchange()
	if pex == nil {
		return nil
	}
	h := ip.mp.m.Host()
	var cands []relayCandidate
	for _, info := range pex.Infos() {
		if info.IrohRelay == "" || info.ID == h.ID() {
			continue
		}
		connected := h.Network().Connectedness(info.ID) == network.Connected
		if !connected && info.Iroh != nil {
			connected = ip.irohPath(info.Iroh.EndpointID) != ""
		}
		cands = append(cands, relayCandidate{id: info.ID, url: info.IrohRelay, connected: connected})
	}
	return pickRelays(ip.relayKey, cands, max)
}

// relayCandidate is an anchor's relay offer.
type relayCandidate struct {
	id  peer.ID
	url string
	// connected: this node holds a connection to the anchor (libp2p or
	// iroh), so it is a node that answers, not only a descriptor.
	connected bool
}

// pickRelays chooses up to max relay URLs among cands (spec/iroh.md,
// "Relays"): anchors this node is connected to before the others, and
// within each group in the order of HMAC-SHA256(key, anchor PeerID),
// key being a secret derived from this node's own key. Nobody else
// knows the order, so no one can make up anchor identities or URLs that
// come first for every node or for a chosen one: a stranger who
// publishes descriptors gets at most its share of the slots by number,
// and only of those the connected anchors leave (each connection is
// bounded by the transports' per-peer and per-address limits). The
// order is stable, so the list does not flap. Anchors offering a URL
// already taken are skipped.
func pickRelays(key []byte, cands []relayCandidate, max int) []string {
	type ranked struct {
		relayCandidate
		score []byte
	}
	rs := make([]ranked, len(cands))
	for i, c := range cands {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(c.id))
		rs[i] = ranked{c, m.Sum(nil)}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.connected != b.connected {
			if a.connected {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.score, b.score)
	})
	var out []string
	for _, r := range rs {
		if len(out) == max {
			break
		}
		if !slices.Contains(out, r.url) {
			out = append(out, r.url)
		}
	}
	return out
}

// relayKeyFor derives pickRelays' key from the node's private key: stable
// across restarts, and known to no one else.
func relayKeyFor(seed []byte) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte("fleetmesh iroh relay choice"))
	return m.Sum(nil)
}
