package node

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/iroh/relay"
)

// relayLearnEvery is how often a node looks at the descriptors it holds
// for anchors' iroh relays.
const relayLearnEvery = 30 * time.Second

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

// learnRelays hands the iroh endpoint [iroh] relays and the iroh relays
// of anchors whose verified descriptors the mesh holds, at most
// max_learned_relays of these, chosen in URL order so the list does not
// flap. No relay is built in.
func (ip *irohPart) learnRelays(ctx context.Context, configured []string, max int) {
	ip.wg.Add(1)
	go func() {
		defer ip.wg.Done()
		periodic.Run(ctx, time.Second, relayLearnEvery, nil, func() {
			ip.ep.SetRelays(append(slices.Clone(configured), ip.anchorRelays(max)...))
		})
	}()
}

// anchorRelays are the iroh relay URLs of anchors in the descriptors the
// mesh holds (the node's own left out).
func (ip *irohPart) anchorRelays(max int) []string {
	h := ip.mp.m.Host()
	var out []string
	for _, p := range h.Peerstore().Peers() {
		if p == h.ID() {
			continue
		}
		raw, ok := ip.mp.m.Descriptor(p)
		if !ok {
			continue
		}
		s, err := descriptor.Verify(raw, time.Now(), descriptor.DefaultLimits())
		if err != nil || s.Descriptor.Class != descriptor.ClassAnchor || s.Descriptor.Offers.IrohRelay == nil {
			continue
		}
		out = append(out, s.Descriptor.Offers.IrohRelay.URL)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > max {
		out = out[:max]
	}
	return out
}
