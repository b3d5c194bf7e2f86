package relay

import (
	"time"

	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/config/setting"
)

// Config holds the relay's limits and NIP-11 description. Zero values take
// the defaults of DefaultConfig, except the rate limits, where 0 means
// unlimited; Fill applies the defaults.
//
// It is also the [relay] section of config.toml (package config embeds
// it): a field with a toml tag is a key of the file, so a new relay
// setting is declared here alone. Fields tagged "-" are set by the code
// that wires the relay or are left at their defaults.
type Config struct {
	// Software is the version NIP-11 reports, the build's (`fleetmesh
	// version`); empty reports "devel". Set by the command, not the file.
	Software string `toml:"-"`
	// URL is the relay's public WebSocket URL, used to check the relay tag
	// of NIP-42 AUTH events.
	URL         string `toml:"url" comment:"the relay's public WebSocket URL (wss://...), announced in NIP-11 and the descriptor and checked in NIP-42 AUTH"`
	Name        string `toml:"name" comment:"NIP-11 name"`
	Description string `toml:"description" comment:"NIP-11 description"`
	Contact     string `toml:"contact" comment:"NIP-11 contact of the operator"`
	// PubKey is the operator's Nostr pubkey (hex) for NIP-11, if any.
	PubKey string `toml:"pubkey" comment:"NIP-11 operator's Nostr pubkey (hex), if any"`
	// Self names the node behind the relay in NIP-11 (DID, PeerID, class).
	Self map[string]string `toml:"-"`

	MaxMessageBytes  int `toml:"max_message_bytes" comment:"largest WebSocket message; larger is refused with a NOTICE"` // a larger WebSocket message is refused with a NOTICE
	MaxEventBytes    int `toml:"max_event_bytes" comment:"largest event; larger is refused with OK false"`               // a larger event is refused with OK false
	MaxTags          int `toml:"max_tags" comment:"most tags an event may have"`
	MaxContentBytes  int `toml:"max_content_bytes" comment:"largest event content"`
	MaxSubscriptions int `toml:"max_subscriptions" comment:"open subscriptions per connection"` // per connection
	MaxFilters       int `toml:"max_filters" comment:"filters per REQ or COUNT"`                // per REQ or COUNT
	MaxLimit         int `toml:"max_limit" comment:"a filter's limit is clamped to this"`       // a filter's limit is clamped to this
	DefaultLimit     int `toml:"default_limit" comment:"limit of a filter that gives none"`     // for filters with no limit
	// MaxFutureSeconds refuses events dated further ahead than this.
	MaxFutureSeconds int64 `toml:"max_future_seconds" comment:"events dated further ahead than this are refused"`
	// MaxInFlight bounds how many EVENTs one connection may have being
	// verified and saved at once; further ones wait for a slot.
	MaxInFlight int `toml:"-"`
	// VerifierKeys bounds how many authors' parsed public keys the relay
	// keeps for signature checks, shared by every connection and by events
	// from the mesh: lifting an x-only key onto the curve is a fifth of a
	// verification, and a relay sees the same authors over and over. In
	// the pure-Go build a key checked against twice also gets a table of
	// precomputed multiples that makes its checks a third cheaper; a key
	// then takes about 1.5 KB, so the default bound is about 24 MiB.
	VerifierKeys int `toml:"-"`
	// SendQueue bounds messages waiting to be written to one connection. A
	// subscriber that lets its live queue fill is disconnected.
	SendQueue int `toml:"-"`

	EventsPerSecond   float64 `toml:"events_per_second" comment:"events a connection may publish a second (0: unlimited)"` // per connection; 0 = unlimited
	EventsBurst       int     `toml:"events_burst" comment:"burst allowance of events_per_second"`
	IPEventsPerSecond float64 `toml:"ip_events_per_second" comment:"events one address may publish a second (0: unlimited)"` // per remote IP; 0 = unlimited
	IPEventsBurst     int     `toml:"ip_events_burst" comment:"burst allowance of ip_events_per_second"`
	// MaxConnsPerIP bounds concurrent WebSocket connections from one IPv4
	// address or IPv6 /64; an IPv6 /56 may hold four times as many. There
	// is no unlimited: 0 takes the default.
	MaxConnsPerIP int `toml:"max_connections_per_ip" comment:"WebSocket connections from one IPv4 address or IPv6 /64 (0 takes the default)"`
	// TrustedProxies are the reverse proxies in front of the relay: a
	// connection from one is keyed, for every per-address limit, by the
	// client named in its X-Forwarded-For, and the proxy's own address is
	// held only to the total (spec/limits.md).
	TrustedProxies clientaddr.Proxies `toml:"trusted_proxies" comment:"reverse proxies (addresses or CIDRs) whose X-Forwarded-For is believed"`
	// MaxConns bounds all concurrent WebSocket connections; 0 derives it
	// from the process's file limit (FileBudget.Conns), keeping a reserve
	// for the store, the mesh and the operator's endpoints.
	MaxConns int `toml:"max_connections" comment:"WebSocket connections in all; 0 derives it from the file limit"`
	// FirstMessageTimeout closes a connection that sends no message this
	// long after its upgrade, so idle sockets do not hold slots.
	FirstMessageTimeout setting.Duration `toml:"first_message_timeout" comment:"a connection that sends nothing this long after its upgrade is closed"`
	// MaxBufferedBytes bounds the bytes waiting in all connections' send
	// queues together. Over it, a live subscriber holding more than its
	// fair share is disconnected as too slow, and a REQ answer is cut
	// short with CLOSED.
	MaxBufferedBytes int64 `toml:"max_buffered_bytes" comment:"bytes queued to all connections together before the greediest are cut"`

	// REQ, COUNT and NEG-OPEN work budgets (budgets.go): query time in
	// milliseconds per second and events read per second, per connection
	// and per address. A client over its budget waits, then is refused
	// with rate-limited.
	ReqMillisPerSecond   int `toml:"req_ms_per_second" comment:"query time a connection may use, in milliseconds a second"`
	ReqRowsPerSecond     int `toml:"req_rows_per_second" comment:"events a connection's queries may read a second"`
	IPReqMillisPerSecond int `toml:"ip_req_ms_per_second" comment:"query time one address may use, in milliseconds a second"`
	IPReqRowsPerSecond   int `toml:"ip_req_rows_per_second" comment:"events one address's queries may read a second"`
	// MaxNegSessions bounds open NIP-77 sessions per connection,
	// IPMaxNegSessions per address.
	MaxNegSessions   int `toml:"max_negentropy_sessions" comment:"open NIP-77 sessions per connection"`
	IPMaxNegSessions int `toml:"ip_max_negentropy_sessions" comment:"open NIP-77 sessions per address"`
	// MaxCountRows bounds the events a COUNT reads; a count cut short by
	// it is answered with approximate: true.
	MaxCountRows int `toml:"max_count_rows" comment:"events one COUNT reads before answering approximate: true"`
	// IPMaxSubscriptions bounds open REQ subscriptions per address: every
	// stored event is matched against every live subscription, so one
	// address must not hold thousands.
	IPMaxSubscriptions int `toml:"ip_max_subscriptions" comment:"open subscriptions per address"`
	// IPConnsPerSecond bounds new WebSocket connections per address (burst
	// four times as many); over it the upgrade is refused with 429.
	IPConnsPerSecond float64 `toml:"ip_connections_per_second" comment:"new WebSocket connections per address a second (burst four times as many)"`

	// AuthRequiredKinds: publishing these kinds needs NIP-42 AUTH, and
	// reading them is limited to events the authenticated key wrote or is
	// tagged in.
	AuthRequiredKinds []int `toml:"auth_required_kinds" comment:"kinds that need NIP-42 AUTH to publish, and are read only by their author or those tagged"`
	// AuthWindow is how far an AUTH event's created_at may be from now.
	AuthWindow time.Duration `toml:"-"`
	// MaxNegRecords bounds how many events one NIP-77 sync session may
	// cover; a filter matching more is refused so the client narrows it.
	MaxNegRecords int `toml:"max_negentropy_records" comment:"events one NIP-77 session may cover; a filter matching more is refused"`
	// LookupTimeout bounds how long a REQ's stored answer and EOSE wait
	// for the mesh to answer a lookup (only when a Lookup hook is set).
	LookupTimeout setting.Duration `toml:"lookup_timeout" comment:"how long a REQ waits for the mesh's answer to a lookup before EOSE"`
	// QueryTimeout bounds one filter's stored-events query.
	QueryTimeout setting.Duration `toml:"query_timeout" comment:"time one filter's stored-events query may take"`
	// PingInterval is how often idle connections are pinged; a connection
	// silent for three intervals is closed.
	PingInterval time.Duration `toml:"-"`

	// files is the file budget MaxConns was derived from (New fills it).
	files FileBudget
}

// spareConns is how many connections the gate admits above MaxConns:
// the operator's requests and readable refusals.
func (c *Config) spareConns() int { return max(8, c.files.Spare/2) }

// DefaultConfig returns the defaults, chosen to match what widely deployed
// relays (strfry) ship, so clients meet familiar bounds.
func DefaultConfig() Config {
	return Config{
		Name:                 "fleetmesh relay",
		Description:          "A fleetmesh node: a Nostr relay backed by a permissionless mesh.",
		MaxMessageBytes:      131072,
		MaxEventBytes:        65536,
		MaxTags:              2500,
		MaxContentBytes:      65536,
		MaxSubscriptions:     200,
		MaxFilters:           10,
		MaxLimit:             500,
		DefaultLimit:         500,
		MaxFutureSeconds:     900,
		MaxInFlight:          64,
		VerifierKeys:         16384,
		MaxNegRecords:        100_000,
		SendQueue:            256,
		EventsPerSecond:      10,
		EventsBurst:          40,
		IPEventsPerSecond:    30,
		IPEventsBurst:        120,
		MaxConnsPerIP:        64,
		FirstMessageTimeout:  setting.DurationOf(30 * time.Second),
		MaxBufferedBytes:     256 << 20,
		IPMaxSubscriptions:   256,
		IPConnsPerSecond:     25,
		ReqMillisPerSecond:   100,
		ReqRowsPerSecond:     5000,
		IPReqMillisPerSecond: 200,
		IPReqRowsPerSecond:   10000,
		MaxNegSessions:       8,
		IPMaxNegSessions:     16,
		MaxCountRows:         100000,
		AuthWindow:           10 * time.Minute,
		QueryTimeout:         setting.DurationOf(10 * time.Second),
		LookupTimeout:        setting.DurationOf(2 * time.Second),
		PingInterval:         30 * time.Second,
	}
}

// Fill replaces zero bounds with the defaults. Event rate limits stay as
// they are: zero there means unlimited. MaxConns stays 0 here; New
// derives it from the file limit.
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
	setInt(&c.MaxConnsPerIP, d.MaxConnsPerIP)
	setInt(&c.IPMaxSubscriptions, d.IPMaxSubscriptions)
	if c.IPConnsPerSecond <= 0 {
		c.IPConnsPerSecond = d.IPConnsPerSecond
	}
	setInt(&c.ReqMillisPerSecond, d.ReqMillisPerSecond)
	setInt(&c.ReqRowsPerSecond, d.ReqRowsPerSecond)
	setInt(&c.IPReqMillisPerSecond, d.IPReqMillisPerSecond)
	setInt(&c.IPReqRowsPerSecond, d.IPReqRowsPerSecond)
	setInt(&c.MaxNegSessions, d.MaxNegSessions)
	setInt(&c.IPMaxNegSessions, d.IPMaxNegSessions)
	setInt(&c.MaxCountRows, d.MaxCountRows)
	if c.MaxBufferedBytes <= 0 {
		c.MaxBufferedBytes = d.MaxBufferedBytes
	}
	if c.FirstMessageTimeout.Duration <= 0 {
		c.FirstMessageTimeout = d.FirstMessageTimeout
	}
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
	if c.LookupTimeout.Duration <= 0 {
		c.LookupTimeout = d.LookupTimeout
	}
	if c.QueryTimeout.Duration <= 0 {
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
