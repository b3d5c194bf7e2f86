package config

import (
	"fmt"
	"net/url"
)

// IrohRelayConfig is the iroh relay an anchor serves at /relay on its relay
// port (spec/iroh.md, "Anchors as iroh relays"); its keys live in [iroh].
type IrohRelayConfig struct {
	// ServeRelay serves the iroh relay protocol while the node's class is
	// anchor, and lists it in the descriptor (default true).
	ServeRelay bool `toml:"serve_relay" comment:"serve the iroh relay protocol at /relay while an anchor, and list it in the descriptor"`
	// RelayURL is the URL the descriptor gives for it; empty: the [relay]
	// url with http(s) for ws(s) and no path.
	RelayURL string `toml:"relay_url" comment:"the relay URL the descriptor gives; '' derives it from [relay] url"`
	// RelayMaxClients bounds the endpoints connected at once.
	RelayMaxClients int `toml:"relay_max_clients" comment:"iroh endpoints connected to the relay at once"`
	// RelayBytesPerSecond and RelayBurstBytes bound what one connection
	// sends through the relay.
	RelayBytesPerSecond int `toml:"relay_bytes_per_second" comment:"bytes a second one connection may send through the relay"`
	RelayBurstBytes     int `toml:"relay_burst_bytes" comment:"burst allowance of that rate, in bytes"`
	// RelayQueueFrames bounds the frames queued for one receiver.
	RelayQueueFrames int `toml:"relay_queue_frames" comment:"frames queued for one receiver before more are dropped"`
	// MaxLearnedRelays bounds the relays a node takes from anchors'
	// descriptors and hands its iroh endpoint, besides [iroh] relays.
	MaxLearnedRelays int `toml:"max_learned_relays" comment:"relays taken from anchors' descriptors, besides [iroh] relays"`
}

// DefaultIrohRelay is the defaults (those of package iroh/relay).
func DefaultIrohRelay() IrohRelayConfig {
	return IrohRelayConfig{ServeRelay: true, RelayMaxClients: 1024, RelayBytesPerSecond: 2 << 20,
		RelayBurstBytes: 4 << 20, RelayQueueFrames: 512, MaxLearnedRelays: 4}
}

func (c *IrohRelayConfig) validate() error {
	if c.RelayURL != "" {
		u, err := url.Parse(c.RelayURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("iroh.relay_url %q: must be an http(s) URL, e.g. https://anchor.example/", c.RelayURL)
		}
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"relay_max_clients", c.RelayMaxClients}, {"relay_bytes_per_second", c.RelayBytesPerSecond},
		{"relay_burst_bytes", c.RelayBurstBytes}, {"relay_queue_frames", c.RelayQueueFrames}} {
		if v.n <= 0 {
			return fmt.Errorf("iroh.%s = %d: must be positive", v.name, v.n)
		}
	}
	if c.MaxLearnedRelays < 0 {
		return fmt.Errorf("iroh.max_learned_relays = %d: must be 0 (learn none) or more", c.MaxLearnedRelays)
	}
	return nil
}
