package relay

import "time"

// Config holds the relay's limits and NIP-11 description. Zero values take
// the defaults of DefaultConfig, except the rate limits, where 0 means
// unlimited; Fill applies the defaults.
type Config struct {
	// URL is the relay's public WebSocket URL, used to check the relay tag
	// of NIP-42 AUTH events.
	URL         string
	Name        string
	Description string
	Contact     string
	// PubKey is the operator's Nostr pubkey (hex) for NIP-11, if any.
	PubKey string
	// Self names the node behind the relay in NIP-11 (DID, PeerID, class).
	Self map[string]string

	MaxMessageBytes  int // a larger WebSocket message is refused with a NOTICE
	MaxEventBytes    int // a larger event is refused with OK false
	MaxTags          int
	MaxContentBytes  int
	MaxSubscriptions int // per connection
	MaxFilters       int // per REQ or COUNT
	MaxLimit         int // a filter's limit is clamped to this
	DefaultLimit     int // for filters with no limit
	// MaxFutureSeconds refuses events dated further ahead than this.
	MaxFutureSeconds int64
	// MaxInFlight bounds how many EVENTs one connection may have being
	// verified and saved at once; further ones wait for a slot.
	MaxInFlight int
	// VerifierKeys bounds how many authors' parsed public keys the relay
	// keeps for signature checks, shared by every connection and by events
	// from the mesh: lifting an x-only key onto the curve is a fifth of a
	// verification, and a relay sees the same authors over and over. In
	// the pure-Go build a key checked against twice also gets a table of
	// precomputed multiples that makes its checks a third cheaper; a key
	// then takes about 1.5 KB, so the default bound is about 24 MiB.
	VerifierKeys int
	// SendQueue bounds messages waiting to be written to one connection. A
	// subscriber that lets its live queue fill is disconnected.
	SendQueue int

	EventsPerSecond   float64 // per connection; 0 = unlimited
	EventsBurst       int
	IPEventsPerSecond float64 // per remote IP; 0 = unlimited
	IPEventsBurst     int
	// MaxConnsPerIP bounds concurrent connections from one IP; 0 = unlimited.
	MaxConnsPerIP int

	// AuthRequiredKinds: publishing these kinds needs NIP-42 AUTH, and
	// reading them is limited to events the authenticated key wrote or is
	// tagged in.
	AuthRequiredKinds []int
	// AuthWindow is how far an AUTH event's created_at may be from now.
	AuthWindow time.Duration
	// MaxNegRecords bounds how many events one NIP-77 sync session may
	// cover; a filter matching more is refused so the client narrows it.
	MaxNegRecords int
	// LookupTimeout bounds how long a REQ waits for the mesh to answer a
	// lookup (only when a Lookup hook is set).
	LookupTimeout time.Duration
	// QueryTimeout bounds one filter's stored-events query.
	QueryTimeout time.Duration
	// PingInterval is how often idle connections are pinged; a connection
	// silent for three intervals is closed.
	PingInterval time.Duration
}

// DefaultConfig returns the defaults, chosen to match what widely deployed
// relays (strfry) ship, so clients meet familiar bounds.
func DefaultConfig() Config {
	return Config{
		Name:              "fleetmesh relay",
		Description:       "A fleetmesh node: a Nostr relay backed by a permissionless mesh.",
		MaxMessageBytes:   131072,
		MaxEventBytes:     65536,
		MaxTags:           2500,
		MaxContentBytes:   65536,
		MaxSubscriptions:  200,
		MaxFilters:        10,
		MaxLimit:          500,
		DefaultLimit:      500,
		MaxFutureSeconds:  900,
		MaxInFlight:       64,
		VerifierKeys:      16384,
		MaxNegRecords:     500_000,
		SendQueue:         256,
		EventsPerSecond:   10,
		EventsBurst:       40,
		IPEventsPerSecond: 30,
		IPEventsBurst:     120,
		AuthWindow:        10 * time.Minute,
		QueryTimeout:      10 * time.Second,
		LookupTimeout:     2 * time.Second,
		PingInterval:      30 * time.Second,
	}
}

// Fill replaces zero bounds with the defaults. Rate limits stay as they
// are: zero there means unlimited.
func (c *Config) Fill() {
	d := DefaultConfig()
	setInt := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setInt(&c.MaxMessageBytes, d.MaxMessageBytes)
	setInt(&c.MaxEventBytes, d.MaxEventBytes)
	setInt(&c.MaxTags, d.MaxTags)
	setInt(&c.MaxContentBytes, d.MaxContentBytes)
	setInt(&c.MaxSubscriptions, d.MaxSubscriptions)
	setInt(&c.MaxFilters, d.MaxFilters)
	setInt(&c.MaxLimit, d.MaxLimit)
	setInt(&c.DefaultLimit, min(d.DefaultLimit, c.MaxLimit))
	setInt(&c.MaxInFlight, d.MaxInFlight)
	setInt(&c.VerifierKeys, d.VerifierKeys)
	setInt(&c.MaxNegRecords, d.MaxNegRecords)
	setInt(&c.SendQueue, d.SendQueue)
	if c.MaxFutureSeconds <= 0 {
		c.MaxFutureSeconds = d.MaxFutureSeconds
	}
	if c.EventsBurst <= 0 {
		c.EventsBurst = max(1, int(c.EventsPerSecond*4))
	}
	if c.IPEventsBurst <= 0 {
		c.IPEventsBurst = max(1, int(c.IPEventsPerSecond*4))
	}
	if c.AuthWindow <= 0 {
		c.AuthWindow = d.AuthWindow
	}
	if c.LookupTimeout <= 0 {
		c.LookupTimeout = d.LookupTimeout
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = d.QueryTimeout
	}
	if c.PingInterval <= 0 {
		c.PingInterval = d.PingInterval
	}
	if c.Name == "" {
		c.Name = d.Name
	}
	if c.Description == "" {
		c.Description = d.Description
	}
}
