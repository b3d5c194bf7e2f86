// Package config is a fleetmesh node's configuration file: its TOML
// schema, its defaults, and loading it with errors that name the key to
// fix. Command-line flags override it; package cmd/fleetmesh applies them.
//
// A section whose settings are all one package's is that package's own
// Config, with toml tags, embedded here ([relay] is relay.Config): its keys
// and defaults are declared once, beside the code that uses them. Values
// are typed (durations are setting.Duration), so go-toml parses each once,
// at load, and a bad one stops Load naming its key.
//
// It is not for runtime state (the address book, the store) and holds no
// secrets: keys live in their own files beside it.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
	"github.com/pelletier/go-toml/v2"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/compute"
	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/dashboard"
	"fleetmesh.org/fleetmesh/label"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/meshsync"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/standing"
)

// FileName is the config file's name in a node home.
const FileName = "config.toml"

// Node classes (docs/design.md §3), and ClassAuto: the class follows the node's
// observed reachability (spec/mesh-nat.md).
const (
	ClassAnchor = "anchor"
	ClassHome   = "home"
	ClassLeaf   = "leaf"
	ClassAuto   = "auto"
)

// Config is the whole file.
type Config struct {
	// Class is the node class declared in the descriptor: anchor, home or
	// leaf, or auto (the default): anchor while the node is publicly
	// reachable and relays for others, home otherwise.
	Class string       `toml:"class" comment:"anchor, home, leaf, or auto: anchor while publicly reachable and relaying for others, else home"`
	Relay RelaySection `toml:"relay"`
	Store StoreConfig  `toml:"store"`
	Log   LogConfig    `toml:"log"`
	// Boundary extends the default boundary rules (spec/boundary.md).
	Boundary BoundaryConfig `toml:"boundary" comment:"rules added to the default boundary policy (spec/boundary.md)"`
	Mesh     MeshConfig     `toml:"mesh"`
	Runtime  RuntimeConfig  `toml:"runtime"`
	// Accounting is windows, receipts and grants (config/accounting.go).
	Accounting AccountingConfig `toml:"accounting"`
	Iroh       IrohConfig       `toml:"iroh"`
	// Standing is the walks that turn verified receipts into standing
	// (spec/standing.md).
	Standing standing.Config `toml:"standing"`
	// Labels is the shared threat intelligence policy (spec/labels.md).
	Labels label.Config `toml:"labels"`
	// Compute is the compute market: whether this node executes jobs for
	// others, and their bounds (spec/compute.md).
	Compute compute.Config `toml:"compute"`
	// Dashboard is the operator page at /dashboard on the relay port.
	Dashboard dashboard.Config `toml:"dashboard"`
	// Manage is the operator's NIP-86 management API (config/manage.go).
	Manage ManageConfig `toml:"manage"`
}

// RuntimeConfig tunes the Go runtime the node runs on.
type RuntimeConfig struct {
	// GCPercent is the garbage collector's target heap growth (Go's GOGC),
	// applied unless the GOGC environment variable is set. The default is
	// 200, not Go's 100: the store keeps its cache and memtables outside
	// the Go heap, so the heap is a small part of the node's memory and at
	// 100 the collector ran often enough to cost about a tenth of a
	// relay's CPU during ingest (docs/benchmarks/profile.md). 0 leaves Go's
	// default.
	GCPercent int `toml:"gc_percent" comment:"Go's GOGC for this node, unless the GOGC environment variable is set"`
}

// MeshConfig configures the node's part of the mesh (spec/mesh-*.md).
type MeshConfig struct {
	// Listen are libp2p multiaddrs to listen on (default: TCP and QUIC on
	// port 4001 on every interface, moved to a free port when another
	// process holds 4001). Empty: the node only dials out, as a home node
	// behind NAT may.
	Listen []string `toml:"listen" comment:"libp2p multiaddrs the mesh listens on; [] only dials out (default: TCP and QUIC on 4001, moved if held)"`
	// Bootstrap are peers (multiaddrs ending in /p2p/<PeerID>) to meet the
	// mesh through. None is built in.
	Bootstrap []string `toml:"bootstrap" comment:"peers to meet the mesh through (multiaddrs ending in /p2p/PEERID); none is built in"`
	// AnnounceRelays are Nostr relays (wss://, or ws:// on loopback) the
	// node publishes its descriptor to, so that others can join through
	// them (spec/announce.md). None is built in.
	AnnounceRelays []string `toml:"announce_relays" comment:"Nostr relays (wss://) this node publishes its descriptor to, so others can --join through them"`
	// MDNS finds peers on the local network by multicast DNS
	// (docs/operators.md, "Joining the mesh", says what it tells the LAN).
	// Auto, the default, runs it while the node is home class: always for
	// class home, for class auto while the node is not publicly reachable,
	// never for anchor or leaf. Files written before "auto" existed say
	// true or false, read as on and off.
	MDNS setting.Switch `toml:"mdns" comment:"find peers on the LAN by multicast DNS: auto (while home class), on or off"`
	// DHT is the Kademlia mode: auto, server, client or off.
	DHT string `toml:"dht" comment:"Kademlia DHT mode: auto, server, client or off"`
	// Subscribe are the NIP-01 filters (JSON) of the data this node keeps
	// and replicates; ["{}"] is everything.
	Subscribe []string `toml:"subscribe" comment:"NIP-01 filters (JSON) of the data this node keeps and replicates; ['{}'] is everything"`
	// SyncInterval is how often the node reconciles with a connected peer.
	SyncInterval setting.Duration `toml:"sync_interval" comment:"how often the node reconciles (negentropy) with a connected peer"`
	// MaintainInterval is how often the node checks its connections, dials
	// remembered and exchanged peers when it has few, and exchanges
	// descriptors.
	MaintainInterval setting.Duration `toml:"maintain_interval" comment:"how often the node checks its connections, dials known peers and exchanges descriptors"`
	// LookupPeers bounds how many peers a REQ asks for events this node
	// does not hold (0: no lookups).
	LookupPeers int `toml:"lookup_peers" comment:"peers a REQ asks for events this node lacks (0: no mesh lookups)"`
	// LookupGrace is the least a lookup waits for the other peers once one
	// has answered (meshsync.Config.LookupGrace); a peer that has not
	// answered by then is left out of lookups for a while.
	LookupGrace setting.Duration `toml:"lookup_grace" comment:"once one peer has answered a lookup, the least it waits for the others; later ones are left out for a while"`
	// ClientShards bounds the author shards the node joins because its own
	// clients hold live subscriptions naming those authors (0: none).
	ClientShards int `toml:"client_shards" comment:"author shards joined for this node's clients' live subscriptions (0: none)"`
	// ClientLinger is how long such a shard stays joined after its last
	// client subscription ends.
	ClientLinger setting.Duration `toml:"client_linger" comment:"how long such a shard stays joined after its last client subscription ends"`
	// ReprovideInterval is how often the node announces again, in the DHT,
	// the events it holds for durability (kad-dht's records last 48h);
	// "0s" turns it off.
	ReprovideInterval setting.Duration `toml:"reprovide_interval" comment:"how often held events are announced again in the DHT; '0s' turns it off"`

	// LimitLoopback holds peers on loopback to the per-address connection
	// limits too (spec/limits.md); off, as go-libp2p has it, so that many
	// nodes on one machine can mesh. A test of hostile load turns it on.
	LimitLoopback bool `toml:"limit_loopback" comment:"hold peers on loopback to the per-address connection limits too (for tests of hostile load)"`

	// Durability (spec/mesh-placement.md).

	// Replication is R, how many storage nodes hold each author shard.
	Replication int `toml:"replication" comment:"R: how many storage nodes hold each author shard"`
	// OfferStorage puts a storage offer in the node's descriptor, so that
	// it holds its share of the mesh's shards. Leaf nodes never do.
	OfferStorage bool `toml:"offer_storage" comment:"declare a storage offer, so this node holds its share of the mesh's shards"`
	// StorageMaxBytes and StorageRetention are the bounds the storage
	// offer declares (spec/descriptor.md). Retention is a promise, not a
	// deletion deadline: a holder deletes no event of a shard it holds
	// at any age (spec/mesh-placement.md, "Retention").
	StorageMaxBytes  uint64           `toml:"storage_max_bytes" comment:"the store's bound: above it client writes are refused with error: (0: unbounded)"`
	StorageRetention setting.Duration `toml:"storage_retention" comment:"how long the storage offer promises to keep held shards' events (nothing held is deleted by age)"`
	// DurableSyncPeers bounds the co-holders one anti-entropy round syncs
	// the durably held shards with.
	DurableSyncPeers int `toml:"durable_sync_peers" comment:"co-holders one anti-entropy round syncs the durably held shards with"`
	// LookupProviders bounds the providers asked for each id a REQ
	// misses, found by content routing on the event's CID (0: no content
	// routing); LookupDHTIDs bounds the ids of one filter looked up so.
	LookupProviders int `toml:"lookup_providers" comment:"DHT providers asked for each id a REQ misses (0: no content routing)"`
	LookupDHTIDs    int `toml:"lookup_dht_ids" comment:"ids of one filter looked up in the DHT at most"`

	// NAT traversal (spec/mesh-nat.md).

	// RelayService says when the node relays circuits (circuit relay v2)
	// for nodes behind NAT: "auto" (while its class is anchor; with class
	// auto, while it is publicly reachable), "on" or "off".
	RelayService string `toml:"relay_service" comment:"relay circuits for nodes behind NAT: auto (while an anchor), on or off"`
	// RelayLimits bound the relay service (all > 0); package mesh declares
	// them and their defaults.
	RelayLimits mesh.RelayLimits `toml:"relay_limits"`
	// StaticRelays are relays (multiaddrs ending in /p2p/<PeerID>) to hold
	// a reservation with while privately reachable, besides the anchors
	// the node learns of. None is built in.
	StaticRelays []string `toml:"static_relays" comment:"circuit relays to reserve a slot with while private, besides anchors learnt"`
	// AutoRelay reserves relay slots while privately reachable, so that
	// peers behind other NATs can reach this node.
	AutoRelay bool `toml:"auto_relay" comment:"reserve relay slots while privately reachable, so peers behind NAT can reach this node"`
	// RelaySearchInterval is how often, at most, the node looks for more
	// relays while it holds fewer reservations than it wants.
	RelaySearchInterval setting.Duration `toml:"relay_search_interval" comment:"how often, at most, to look for more relays while short of reservations"`
	// HolePunching turns on DCUtR: direct connections through NATs.
	HolePunching bool `toml:"hole_punching" comment:"DCUtR: upgrade relayed connections to direct ones through NATs"`
	// NATPortMap asks the LAN router for a port mapping (UPnP, NAT-PMP).
	NATPortMap bool `toml:"nat_port_map" comment:"ask the LAN router for a port mapping (UPnP, NAT-PMP)"`
}

// SubscribeFilters parses Subscribe.
func (m *MeshConfig) SubscribeFilters() ([]nostr.Filter, error) {
	out := make([]nostr.Filter, len(m.Subscribe))
	for i, s := range m.Subscribe {
		if err := json.Unmarshal([]byte(s), &out[i]); err != nil {
			return nil, fmt.Errorf("mesh.subscribe[%d] %q: %v (write a NIP-01 filter as JSON, e.g. '{\"kinds\":[1]}')", i, s, err)
		}
	}
	return out, nil
}

// BoundaryConfig holds rules added to the boundary policy's defaults. The
// defaults themselves cannot be switched off.
type BoundaryConfig struct {
	Rules []boundary.RuleSpec `toml:"rules" comment:"extra rules: [{name, class, kinds, tags, content}] (spec/boundary.md)"`
}

// RelaySection is the [relay] section: the address the client-facing
// Nostr relay listens on, and the relay's own settings, whose keys and
// defaults package relay declares (relay.Config).
type RelaySection struct {
	// Listen is the relay's TCP address (host:port).
	Listen string `toml:"listen" comment:"the relay's TCP address (host:port); clients use the url below when set"`
	relay.Config
}

// StoreConfig configures the event store: the embedded Pebble store (the
// default) or PostgreSQL, shared by several front-end processes of one
// node (docs/operators.md, "Many front-ends over PostgreSQL").
type StoreConfig struct {
	// Backend is pebble (the embedded store under dir) or postgres (the
	// database at postgres_url).
	Backend string `toml:"backend" comment:"pebble (the embedded store under dir) or postgres (the database at postgres_url, which several front-ends of this node may share)"`
	// PostgresURL is the PostgreSQL connection string, used with backend
	// postgres.
	PostgresURL string `toml:"postgres_url" comment:"with backend postgres: the connection string (postgres://user:pass@host:5432/db); through pgbouncer only in session mode"`
	// Dir is the store directory, relative to the node home unless absolute.
	Dir string `toml:"dir" comment:"the event store's directory, relative to the node home unless absolute"`
	// CacheMB is the store's block cache in MiB; 0 takes 64.
	CacheMB int `toml:"cache_mb" comment:"the store's block cache, in MiB (0: 64)"`
	// MemTableMB is the size of each of the store's memtables (its write
	// buffers; two or three are in memory at once). Fixed like the cache,
	// but filled only as events are written: a small node reaches its
	// memory plateau sooner with a smaller one. 0 takes 16.
	MemTableMB uint `toml:"memtable_mb" comment:"each of the store's write buffers (memtables), in MiB: 1 to 1024 (0: 16)"`
}

// LogConfig configures structured logging.
type LogConfig struct {
	Level  string `toml:"level" comment:"debug, info, warn or error"` // debug, info, warn, error
	Format string `toml:"format" comment:"text or json"`              // text or json
}

// DefaultListen is where a node's relay listens when nothing says
// otherwise: loopback, so a fresh node exposes nothing until its operator
// chooses an address.
const DefaultListen = "127.0.0.1:7447"

// Default returns the configuration a new node starts with.
func Default() Config {
	rc := relay.DefaultConfig()
	rc.TrustedProxies = clientaddr.Proxies{}
	rc.AuthRequiredKinds = []int{}
	return Config{
		Class:    ClassAuto,
		Relay:    RelaySection{Listen: DefaultListen, Config: rc},
		Store:    StoreConfig{Backend: StorePebble, Dir: "data", CacheMB: 64, MemTableMB: 16},
		Boundary: BoundaryConfig{Rules: []boundary.RuleSpec{}},
		Runtime:  RuntimeConfig{GCPercent: 200},
		Iroh:     DefaultIroh(),
		Mesh: MeshConfig{
			Listen:              mesh.DefaultListenAddrs(),
			Bootstrap:           []string{},
			AnnounceRelays:      []string{},
			MDNS:                setting.Auto,
			DHT:                 "auto",
			Subscribe:           []string{"{}"},
			SyncInterval:        setting.DurationOf(time.Minute),
			MaintainInterval:    setting.DurationOf(30 * time.Second),
			LookupPeers:         16,
			LookupGrace:         setting.DurationOf(meshsync.DefaultLookupGrace),
			ClientShards:        64,
			ClientLinger:        setting.DurationOf(5 * time.Minute),
			ReprovideInterval:   setting.DurationOf(22 * time.Hour),
			RelayService:        "auto",
			RelayLimits:         mesh.DefaultRelayLimits(),
			StaticRelays:        []string{},
			AutoRelay:           true,
			RelaySearchInterval: setting.DurationOf(30 * time.Second),
			HolePunching:        true,
			NATPortMap:          false,
			Replication:         3,
			OfferStorage:        true,
			StorageMaxBytes:     10 << 30,
			StorageRetention:    setting.DurationOf(2160 * time.Hour),
			DurableSyncPeers:    8,
			LookupProviders:     3,
			LookupDHTIDs:        16,
		},
		Log:        LogConfig{Level: "info", Format: "text"},
		Accounting: DefaultAccounting(),
		Dashboard:  dashboard.DefaultConfig(),
		Manage:     DefaultManage(),
		Standing:   standing.DefaultConfig(),
		Labels:     label.DefaultConfig(),
		Compute:    compute.DefaultConfig(),
	}
}

// Load reads a config file over the defaults: keys the file leaves out
// keep their default. An unknown key is an error, since a misspelt limit
// silently left at its default is worse than a refusal to start.
func Load(path string) (Config, error) {
	cfg := Default()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			return cfg, fmt.Errorf("config: %s: unknown key(s):\n%s", path, sm.String())
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			msg := strings.TrimPrefix(de.Error(), "toml: ")
			if key := de.Key(); len(key) > 0 {
				return cfg, fmt.Errorf("config: %s:%d:%d: %s: %s", path, row, col, strings.Join(key, "."), msg)
			}
			return cfg, fmt.Errorf("config: %s:%d:%d: %s", path, row, col, msg)
		}
		if key := setting.NonTextKey(data, reflect.TypeFor[Config]()); key != "" {
			return cfg, fmt.Errorf("config: %s: %s: %w", path, key, err)
		}
		return cfg, fmt.Errorf("config: %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config: %s: %w", path, err)
	}
	return cfg, nil
}

// Validate checks values that would otherwise fail later and obscurely.
func (c *Config) Validate() error {
	switch c.Class {
	case ClassAnchor, ClassHome, ClassLeaf, ClassAuto:
	case "":
		c.Class = ClassAuto
	default:
		return fmt.Errorf("class %q: must be anchor, home, leaf or auto", c.Class)
	}
	if err := c.Iroh.validate(); err != nil {
		return err
	}
	if c.Runtime.GCPercent < 0 {
		return fmt.Errorf("runtime: gc_percent %d: must be >= 0 (0 = Go's default; to turn the collector off set GOGC=off)", c.Runtime.GCPercent)
	}
	if err := c.Store.validate(); err != nil {
		return err
	}
	if c.Store.CacheMB < 0 {
		return fmt.Errorf("store.cache_mb %d: must be >= 0 (0 = 64)", c.Store.CacheMB)
	}
	if c.Store.MemTableMB > 1024 {
		return fmt.Errorf("store.memtable_mb %d: must be 1 to 1024 (0 = 16)", c.Store.MemTableMB)
	}
	if c.Relay.EventsPerSecond < 0 || c.Relay.IPEventsPerSecond < 0 {
		return errors.New("relay: events_per_second and ip_events_per_second must be >= 0 (0 = unlimited)")
	}
	if c.Relay.FirstMessageTimeout.Duration < 0 {
		return fmt.Errorf("relay.first_message_timeout %s: write a positive duration, e.g. \"30s\" (0 takes the default)", c.Relay.FirstMessageTimeout)
	}
	if c.Relay.MaxConnsPerIP < 0 || c.Relay.MaxConns < 0 {
		return errors.New("relay: max_connections_per_ip and max_connections must be >= 0 (0 = the default; there is no unlimited)")
	}
	if _, err := c.Mesh.SubscribeFilters(); err != nil {
		return err
	}
	switch c.Mesh.DHT {
	case "", "auto", "server", "client", "off":
	default:
		return fmt.Errorf("mesh.dht %q: must be auto, server, client or off", c.Mesh.DHT)
	}
	if c.Mesh.SyncInterval.Duration < 0 {
		return fmt.Errorf("mesh.sync_interval %s: write a positive duration, e.g. \"1m\" (0 takes the default)", c.Mesh.SyncInterval)
	}
	if c.Mesh.MaintainInterval.Duration < 0 {
		return fmt.Errorf("mesh.maintain_interval %s: write a positive duration, e.g. \"30s\" (0 takes the default)", c.Mesh.MaintainInterval)
	}
	if c.Mesh.ClientShards < 0 || c.Mesh.ClientShards > 256 {
		return fmt.Errorf("mesh.client_shards %d: must be 0 to 256", c.Mesh.ClientShards)
	}
	if c.Mesh.ClientLinger.Duration < 0 {
		return fmt.Errorf("mesh.client_linger %s: write a duration of 0 or more, e.g. \"5m\"", c.Mesh.ClientLinger)
	}
	if d := c.Mesh.ReprovideInterval.Duration; d < 0 || (d > 0 && d < time.Minute) || d > 47*time.Hour {
		return fmt.Errorf("mesh.reprovide_interval %s: write a duration from 1m to 47h (provider records last 48h), or \"0s\" to turn it off", c.Mesh.ReprovideInterval)
	}
	lookup := c.Relay.LookupTimeout.Duration
	if lookup < 0 || lookup > time.Minute {
		return fmt.Errorf("relay.lookup_timeout %s: write a duration up to 1m, e.g. \"2s\" (0 takes the default): a REQ waits this long for the mesh at most", c.Relay.LookupTimeout)
	}
	if lookup == 0 {
		lookup = relay.DefaultConfig().LookupTimeout.Duration
	}
	if d := c.Mesh.LookupGrace.Duration; d < 0 || d > lookup {
		return fmt.Errorf("mesh.lookup_grace %s: write a duration from 0 (the default) to relay.lookup_timeout (%s), e.g. \"250ms\"", c.Mesh.LookupGrace, lookup)
	}
	if err := c.Dashboard.Check(); err != nil {
		return fmt.Errorf("dashboard.%w", err)
	}
	if err := c.Mesh.validateNAT(); err != nil {
		return err
	}
	if err := c.Mesh.validateDurability(); err != nil {
		return err
	}
	if err := c.Accounting.validate(); err != nil {
		return err
	}
	if err := c.Manage.validate(); err != nil {
		return err
	}
	if err := c.Standing.Check(); err != nil {
		return fmt.Errorf("standing.%w", err)
	}
	if err := c.Labels.Check(); err != nil {
		return fmt.Errorf("labels.%w", err)
	}
	if err := c.Compute.Check(); err != nil {
		return fmt.Errorf("compute.%w", err)
	}
	for _, r := range c.Boundary.Rules {
		if _, err := r.Compile(); err != nil {
			return err
		}
	}
	switch strings.ToLower(c.Log.Level) {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level %q: must be debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "", "text", "json":
	default:
		return fmt.Errorf("log.format %q: must be text or json", c.Log.Format)
	}
	return checkSigns(*c)
}

// checkSigns is the one rule every number in config.toml follows: sizes,
// counts, rates, shares and bounds are 0 or more, 0 taking the default or
// turning the thing off as the key's comment says. No key here has a
// meaning below zero. The keys come from the schema (walkKeys), so a new
// key is covered when it is declared; the checks above run first and say
// more about the keys they know.
func checkSigns(c Config) error {
	var keys []Key
	walkKeys(reflect.ValueOf(c), "", &keys)
	for _, k := range keys {
		if k.Kind() == NumberValue && strings.HasPrefix(k.Default, "-") {
			return fmt.Errorf("%s = %s: must be 0 or more (no number in config.toml has a meaning below zero; see its comment for what 0 means)", k.Full(), k.Default)
		}
	}
	return nil
}

// validateNAT checks the NAT traversal keys of [mesh].
func (m *MeshConfig) validateNAT() error {
	switch m.RelayService {
	case "", "auto", "on", "off":
	default:
		return fmt.Errorf("mesh.relay_service %q: must be auto, on or off", m.RelayService)
	}
	for i, s := range m.StaticRelays {
		a, err := multiaddr.NewMultiaddr(s)
		if err == nil {
			_, err = peer.AddrInfoFromP2pAddr(a)
		}
		if err != nil {
			return fmt.Errorf("mesh.static_relays[%d] %q: %v (write a multiaddr ending in /p2p/<PeerID>)", i, s, err)
		}
	}
	durations := []struct {
		key string
		v   setting.Duration
	}{
		{"mesh.relay_search_interval", m.RelaySearchInterval},
		{"mesh.relay_limits.reservation_ttl", m.RelayLimits.ReservationTTL},
		{"mesh.relay_limits.circuit_duration", m.RelayLimits.CircuitDuration},
	}
	for _, d := range durations {
		if d.v.Duration <= 0 {
			return fmt.Errorf("%s %s: write a positive duration, e.g. \"2m\"", d.key, d.v)
		}
	}
	l := m.RelayLimits
	counts := []struct {
		key string
		v   int64
	}{
		{"mesh.relay_limits.max_reservations", int64(l.MaxReservations)},
		{"mesh.relay_limits.max_reservations_per_ip", int64(l.MaxReservationsPerIP)},
		{"mesh.relay_limits.max_circuits", int64(l.MaxCircuits)},
		{"mesh.relay_limits.circuit_bytes", l.CircuitBytes},
	}
	for _, c := range counts {
		if c.v <= 0 {
			return fmt.Errorf("%s = %d: must be > 0 (a relay without limits is not offered)", c.key, c.v)
		}
	}
	return nil
}

// Encode writes the config as TOML.
func (c *Config) Encode() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# fleetmesh node configuration. Flags given to `fleetmesh run` override it.\n# Rate limits: 0 means unlimited.\n\n")
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(false)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return buf.Bytes(), nil
}
