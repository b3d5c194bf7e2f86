package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/nostr"
)

// ConfigFile is the gateway's config file name in the node home. It is
// separate from the node's config.toml so that the gateway's settings
// (which name the backend) never mix with the node's.
const ConfigFile = "gateway.toml"

// StateFile holds the persisted cursors in the node home.
const StateFile = "gateway-state.json"

// DefaultBackendKeyFile is the backend AUTH key's file name in the home.
const DefaultBackendKeyFile = "backend.key"

// Config is gateway.toml. Durations are Go duration strings ("30s"), parsed
// as the file is read.
type Config struct {
	// Backend is the backend relay's URL, ws:// (loopback only) or wss://.
	// The --backend flag overrides it.
	Backend string `toml:"backend"`
	// ToMesh are the NIP-01 filters of events carried backend → mesh.
	// Nil (not written) is refused unless CarryEverything is set.
	ToMesh []map[string]any `toml:"to_mesh"`
	// ToBackend are the NIP-01 filters of events carried mesh → backend.
	ToBackend []map[string]any `toml:"to_backend"`
	// CarryEverything is the operator's explicit choice to carry every
	// event both ways (what the boundary policy allows), in place of
	// to_mesh and to_backend. The --carry-everything flag sets it.
	CarryEverything bool `toml:"carry_everything"`
	// BackendKeyFile is the Nostr secp256k1 secret the gateway answers the
	// backend's NIP-42 AUTH with; relative to the home.
	BackendKeyFile string `toml:"backend_key_file"`
	// BackendDataDir is where the backend keeps its data when it runs on
	// the same machine; used only for the shared-nothing check.
	BackendDataDir string `toml:"backend_data_dir"`
	// RetryMin and RetryMax bound the reconnect backoff.
	RetryMin setting.Duration `toml:"retry_min"`
	RetryMax setting.Duration `toml:"retry_max"`
	// Overlap is how far before a cursor a catch-up starts, to cover clock
	// skew and events that arrive late with an older created_at.
	Overlap setting.Duration `toml:"overlap"`
	// QueueSize bounds the mesh → backend queue of live events.
	QueueSize int `toml:"queue_size"`
	// PublishTimeout bounds the wait for a backend's OK.
	PublishTimeout setting.Duration `toml:"publish_timeout"`
	// MaxSyncRecords bounds the events one NIP-77 reconciliation loads
	// from the local store; a larger window falls back to since windows.
	MaxSyncRecords int `toml:"max_sync_records"`
	// PageSize is the limit of each REQ page of a since-window catch-up.
	PageSize int `toml:"page_size"`
}

// Settings is a validated Config in the types the gateway uses.
type Settings struct {
	Backend        string
	ToMesh         []nostr.Filter
	ToBackend      []nostr.Filter
	BackendKeyFile string // absolute
	BackendDataDir string // absolute, or empty
	RetryMin       time.Duration
	RetryMax       time.Duration
	Overlap        time.Duration
	QueueSize      int
	PublishTimeout time.Duration
	MaxSyncRecords int
	PageSize       int
}

// defaultConfigText is written to a home that has no gateway.toml. It is
// text rather than an encoded struct so the operator gets the comments.
const defaultConfigText = `# fleetmesh gateway configuration (spec/gateway.md).
# The gateway is a mesh node on one side and an ordinary NIP-01 client of a
# private relay backend on the other. The boundary policy (config.toml
# [[boundary.rules]]) applies in both directions on top of these filters.

# The backend relay: wss://..., or ws://... on a loopback address.
# The --backend flag overrides this.
backend = ""

# What crosses each way, as NIP-01 filter objects. The gateway refuses to
# start until both are written: a private backend's events reach the mesh
# only if you say which. Examples:
#   to_mesh = [{ kinds = [1, 30023], "#t" = ["public"] }]  # backend -> mesh
#   to_backend = [{ kinds = [1] }]                         # mesh -> backend
#   to_mesh = [{ kinds = [] }]                             # nothing this way
# [{}] is everything one way. To carry everything both ways, write
#   carry_everything = true
# instead of the two filters (or pass --carry-everything).

# A Nostr secp256k1 secret (hex) the gateway answers the backend's NIP-42
# AUTH with. Created (mode 0600) if missing, never overwritten. It must not
# be the node key, nor live in the backend's data directory.
backend_key_file = "backend.key"

# Where the backend keeps its data if it runs on this machine. Only used to
# refuse to start when the gateway and the backend would share files.
backend_data_dir = ""

# Reconnect backoff: capped exponential with jitter between these bounds.
retry_min = "500ms"
retry_max = "30s"

# A catch-up starts this long before its cursor (clock skew, late events).
overlap = "10m"

# Bounds.
queue_size = 10000
publish_timeout = "10s"
max_sync_records = 500000
page_size = 500
`

// DefaultConfig is the configuration of a new gateway.toml.
func DefaultConfig() Config {
	return Config{
		BackendKeyFile: DefaultBackendKeyFile,
		RetryMin:       setting.DurationOf(500 * time.Millisecond),
		RetryMax:       setting.DurationOf(30 * time.Second),
		Overlap:        setting.DurationOf(10 * time.Minute),
		QueueSize:      10000,
		PublishTimeout: setting.DurationOf(10 * time.Second),
		MaxSyncRecords: 500000,
		PageSize:       500,
	}
}

// LoadConfig reads DIR/gateway.toml, writing the default file first if
// there is none (never replacing one).
func LoadConfig(home string) (Config, error) {
	path := filepath.Join(home, ConfigFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	switch {
	case err == nil:
		_, werr := f.WriteString(defaultConfigText)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return Config{}, fmt.Errorf("gateway: write %s: %w", path, werr)
		}
	case !errors.Is(err, os.ErrExist):
		return Config{}, fmt.Errorf("gateway: %w", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("gateway: %w", err)
	}
	cfg := DefaultConfig()
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			return cfg, fmt.Errorf("gateway: %s: unknown key(s):\n%s", path, sm.String())
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return cfg, fmt.Errorf("gateway: %s:%d:%d: %s: %s", path, row, col, strings.Join(de.Key(), "."), strings.TrimPrefix(de.Error(), "toml: "))
		}
		if key := setting.NonTextKey(data, reflect.TypeFor[Config]()); key != "" {
			return cfg, fmt.Errorf("gateway: %s: %s: %w", path, key, err)
		}
		return cfg, fmt.Errorf("gateway: %s: %w", path, err)
	}
	return cfg, nil
}

// Settings validates the configuration; relative paths resolve against
// home.
func (c Config) Settings(home string) (Settings, error) {
	s := Settings{QueueSize: c.QueueSize, MaxSyncRecords: c.MaxSyncRecords, PageSize: c.PageSize}
	var err error
	if s.Backend, err = CheckBackendURL(c.Backend); err != nil {
		return s, err
	}
	if s.ToMesh, err = parseFilters("to_mesh", c.ToMesh); err != nil {
		return s, err
	}
	if s.ToBackend, err = parseFilters("to_backend", c.ToBackend); err != nil {
		return s, err
	}
	durations := []struct {
		key string
		val setting.Duration
		dst *time.Duration
	}{
		{"retry_min", c.RetryMin, &s.RetryMin},
		{"retry_max", c.RetryMax, &s.RetryMax},
		{"overlap", c.Overlap, &s.Overlap},
		{"publish_timeout", c.PublishTimeout, &s.PublishTimeout},
	}
	for _, d := range durations {
		if d.val.Duration < 0 {
			return s, fmt.Errorf("gateway: %s = %s is not a non-negative duration like \"30s\"", d.key, d.val)
		}
		*d.dst = d.val.Duration
	}
	switch {
	case s.RetryMin <= 0 || s.RetryMax < s.RetryMin:
		return s, fmt.Errorf("gateway: retry_min (%s) must be positive and at most retry_max (%s)", s.RetryMin, s.RetryMax)
	case s.PublishTimeout <= 0:
		return s, errors.New("gateway: publish_timeout must be positive")
	case s.QueueSize < 1:
		return s, errors.New("gateway: queue_size must be at least 1")
	case s.MaxSyncRecords < 1:
		return s, errors.New("gateway: max_sync_records must be at least 1")
	case s.PageSize < 1:
		return s, errors.New("gateway: page_size must be at least 1")
	case c.BackendKeyFile == "":
		return s, errors.New("gateway: backend_key_file must name a file")
	}
	if s.BackendKeyFile, err = absIn(home, c.BackendKeyFile); err != nil {
		return s, err
	}
	if c.BackendDataDir != "" {
		if s.BackendDataDir, err = absIn(home, c.BackendDataDir); err != nil {
			return s, err
		}
	}
	// Last, so that a file with other mistakes gets those named first.
	if err := c.checkDirections(); err != nil {
		return s, err
	}
	if c.CarryEverything {
		s.ToMesh, s.ToBackend = []nostr.Filter{{}}, []nostr.Filter{{}}
	}
	return s, nil
}

// checkDirections refuses a configuration that does not say what crosses
// each way: both filters must be written, or carry_everything set instead
// of them (never both, which would leave one of them ignored).
func (c Config) checkDirections() error {
	written := func(f []map[string]any) bool { return f != nil }
	var missing []string
	for _, d := range []struct {
		key, way string
		f        []map[string]any
	}{{"to_mesh", "backend → mesh", c.ToMesh}, {"to_backend", "mesh → backend", c.ToBackend}} {
		switch {
		case c.CarryEverything && written(d.f):
			return fmt.Errorf("gateway: %s: carry_everything (or --carry-everything) and %s are both set; keep the filters, or carry_everything alone", ConfigFile, d.key)
		case !c.CarryEverything && !written(d.f):
			missing = append(missing, fmt.Sprintf("%s (%s)", d.key, d.way))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("gateway: %s does not say what crosses %s: write NIP-01 filters, e.g. to_mesh = [{ kinds = [1] }] and to_backend = [{ kinds = [] }] for nothing, or set carry_everything = true (or pass --carry-everything) to carry everything both ways",
			ConfigFile, strings.Join(missing, " or "))
	}
	return nil
}

// Describe says in one line per direction what the gateway carries, for
// the operator to read at start.
func (s Settings) Describe() []string {
	return []string{
		"to_mesh (backend → mesh): " + describeFilters(s.ToMesh),
		"to_backend (mesh → backend): " + describeFilters(s.ToBackend),
	}
}

func describeFilters(fs []nostr.Filter) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		data, err := json.Marshal(f)
		if err != nil {
			data = []byte(fmt.Sprintf("%+v", f))
		}
		if string(data) == "{}" {
			return "everything the boundary policy allows"
		}
		parts = append(parts, string(data))
	}
	if len(parts) == 1 && parts[0] == `{"kinds":[]}` {
		return "nothing"
	}
	return "events matching " + strings.Join(parts, " or ") + ", if the boundary policy allows"
}

func absIn(home, p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(home, p)
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	return a, nil
}

// CheckBackendURL accepts wss:// URLs and ws:// URLs on loopback hosts
// (plain WebSocket would expose the AUTH exchange and the events on any
// other network).
func CheckBackendURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("gateway: no backend: pass --backend wss://… or set backend in gateway.toml")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("gateway: backend %q: %w", raw, err)
	}
	switch u.Scheme {
	case "wss":
	case "ws":
		host := u.Hostname()
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", fmt.Errorf("gateway: backend %q: ws:// is allowed only on loopback; use wss://", raw)
		}
	default:
		return "", fmt.Errorf("gateway: backend %q: want a ws:// or wss:// URL", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("gateway: backend %q has no host", raw)
	}
	return raw, nil
}

// parseFilters turns TOML tables into NIP-01 filters by way of their JSON
// form, so the config accepts exactly what a REQ accepts.
func parseFilters(key string, tables []map[string]any) ([]nostr.Filter, error) {
	if tables == nil { // not written: checkDirections says what to write
		return nil, nil
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("gateway: %s is empty; [{}] carries everything, and to carry nothing in a direction use [{ kinds = [] }]", key)
	}
	out := make([]nostr.Filter, len(tables))
	for i, t := range tables {
		for k := range t {
			switch {
			case k == "limit" || k == "search":
				return nil, fmt.Errorf("gateway: %s[%d]: %q has no meaning for what crosses the boundary", key, i, k)
			case k == "ids" || k == "authors" || k == "kinds" || k == "since" || k == "until":
			case len(k) == 2 && k[0] == '#':
			default:
				return nil, fmt.Errorf("gateway: %s[%d]: unknown filter key %q (NIP-01: ids, authors, kinds, since, until, #x)", key, i, k)
			}
		}
		data, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("gateway: %s[%d]: %w", key, i, err)
		}
		if err := json.Unmarshal(data, &out[i]); err != nil {
			return nil, fmt.Errorf("gateway: %s[%d] is not a NIP-01 filter: %v", key, i, strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	return out, nil
}
