package descriptor

// IrohRelayOffer is an anchor's iroh relay (spec/iroh.md, "Anchors as iroh
// relays"): nodes learn relay URLs from these, never from a built-in list.
type IrohRelayOffer struct {
	// URL is the relay's http(s) base URL; iroh clients speak the relay
	// protocol at its /relay.
	URL string `json:"url"`
	// MaxClients and BytesPerSecond are the relay's limits.
	MaxClients     uint64 `json:"max_clients"`
	BytesPerSecond uint64 `json:"bytes_per_second"`
}

func (r *IrohRelayOffer) validate() error {
	return checkURL(r.URL, DefaultLimits(), "http", "https")
}
