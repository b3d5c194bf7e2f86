package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"fleetmesh.org/fleetmesh/nostr"
)

// ErrShared is the error of every shared-nothing refusal; its message says
// what is shared and what to change.
var ErrShared = errors.New("gateway: the mesh side and the backend side share")

// MeshSide is what the gateway's node has before it opens: the files and
// the secret the shared-nothing checks compare with the backend side.
// Paths should be absolute.
type MeshSide struct {
	Home       string // the gateway's node home
	KeyFile    string // the node key file
	Seed       []byte // the node key's 32-byte Ed25519 seed
	ConfigFile string // the node's config.toml
	StoreDir   string // the node's event store
}

// SettingsError is an invalid gateway.toml setting (or backend flag): its
// message says what to fix, and a command reports it as a usage error.
type SettingsError struct{ Err error }

func (e *SettingsError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *SettingsError) Unwrap() error { return e.Err }

// Overrides are the command-line flags that take the place of gateway.toml
// keys.
type Overrides struct {
	Backend         string // --backend: overrides backend when not empty
	CarryEverything bool   // --carry-everything: sets carry_everything
}

// Prepare makes every check a gateway runs before its node opens, in an
// order that keeps a refused gateway from touching anything: gateway.toml
// and the node's config are different files, gateway.toml loads (the
// overrides applied) and its settings are valid, the
// two sides share no path, and only then is the backend AUTH key read or
// created and compared with the mesh seed. It returns the settings and
// the backend key. Its errors wrap ErrShared for a shared file or secret,
// and are a *SettingsError for a bad setting.
func Prepare(mesh MeshSide, o Overrides) (Settings, nostr.SecretKey, error) {
	gatewayConfig := filepath.Join(mesh.Home, ConfigFile)
	// One file read as both configs would be refused by CheckPaths too, but
	// parsing it first would fail with a less useful message.
	if err := CheckConfigFiles(gatewayConfig, mesh.ConfigFile); err != nil {
		return Settings{}, nostr.SecretKey{}, err
	}
	cfg, err := LoadConfig(mesh.Home)
	if err != nil {
		return Settings{}, nostr.SecretKey{}, err
	}
	if o.Backend != "" {
		cfg.Backend = o.Backend
	}
	cfg.CarryEverything = cfg.CarryEverything || o.CarryEverything
	settings, err := cfg.Settings(mesh.Home)
	if err != nil {
		return Settings{}, nostr.SecretKey{}, &SettingsError{err}
	}
	err = CheckPaths(Sides{
		MeshSide:       mesh,
		GatewayConfig:  gatewayConfig,
		BackendKeyFile: settings.BackendKeyFile,
		BackendDataDir: settings.BackendDataDir,
	})
	if err != nil {
		return Settings{}, nostr.SecretKey{}, err
	}
	key, secret, err := LoadOrCreateBackendKey(settings.BackendKeyFile)
	if err != nil {
		return Settings{}, nostr.SecretKey{}, err
	}
	if err := CheckSecrets(mesh.Seed, secret); err != nil {
		return Settings{}, nostr.SecretKey{}, err
	}
	return settings, key, nil
}

// Sides names the files and secrets of both sides that the shared-nothing
// check compares: the mesh side's, and the backend side's. Paths should be
// absolute.
type Sides struct {
	MeshSide
	GatewayConfig  string // gateway.toml
	BackendKeyFile string
	BackendDataDir string // empty when the backend is elsewhere
}

// CheckPaths refuses paths the two sides share: a home or store nested
// with the backend's data directory (either way), the backend key being
// the mesh key file, a key or config file inside the backend's data, and
// the gateway and node reading one config file. It runs before the backend
// key is read or created, so a wrong path never creates a key in the wrong
// place.
func CheckPaths(s Sides) error {
	if s.BackendDataDir != "" {
		for _, p := range []struct{ name, path string }{
			{"node home", s.Home},
			{"event store", s.StoreDir},
		} {
			if nested(p.path, s.BackendDataDir) {
				return fmt.Errorf("%w a directory: the gateway's %s %s and the backend's data directory %s are the same or one contains the other; give the gateway a home of its own outside the backend's data (or fix backend_data_dir in gateway.toml)",
					ErrShared, p.name, p.path, s.BackendDataDir)
			}
		}
		for _, p := range []struct{ name, path string }{
			{"backend key file", s.BackendKeyFile},
			{"mesh key file", s.KeyFile},
			{"gateway config", s.GatewayConfig},
			{"node config", s.ConfigFile},
		} {
			if nested(p.path, s.BackendDataDir) {
				return fmt.Errorf("%w a file: the gateway's %s %s lies inside the backend's data directory %s; keep the gateway's keys and config in its own home (backend_key_file in gateway.toml)",
					ErrShared, p.name, p.path, s.BackendDataDir)
			}
		}
	}
	if samePath(s.BackendKeyFile, s.KeyFile) {
		return fmt.Errorf("%w a key file: backend_key_file %s is the node's mesh key file %s; point backend_key_file in gateway.toml at a file of its own (the default %q is created for you)",
			ErrShared, s.BackendKeyFile, s.KeyFile, DefaultBackendKeyFile)
	}
	return CheckConfigFiles(s.GatewayConfig, s.ConfigFile)
}

// CheckConfigFiles refuses a gateway.toml that is the node's config file
// (a symlink or hard link to it).
func CheckConfigFiles(gatewayConfig, nodeConfig string) error {
	if samePath(gatewayConfig, nodeConfig) {
		return fmt.Errorf("%w a config file: %s and the node's %s are the same file; keep gateway.toml a file of its own",
			ErrShared, gatewayConfig, nodeConfig)
	}
	return nil
}

// CheckSecrets refuses a backend AUTH secret equal to the mesh key's seed:
// the two identities must not be one secret in two encodings.
func CheckSecrets(meshSeed, backendSecret []byte) error {
	if len(meshSeed) > 0 && bytes.Equal(meshSeed, backendSecret) {
		return fmt.Errorf("%w a secret: the backend AUTH key's 32 bytes are the mesh key's Ed25519 seed; delete the backend key file and let the gateway create a fresh one", ErrShared)
	}
	return nil
}

// nested reports whether a and b are the same directory or one lies
// inside the other, by cleaned absolute path after resolving symlinks of
// the parts that exist, and by inode for the same directory.
func nested(a, b string) bool {
	ra, rb := resolve(a), resolve(b)
	if ra == rb || samePath(a, b) {
		return true
	}
	return within(ra, rb) || within(rb, ra)
}

// within reports whether p lies strictly inside dir.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// samePath reports whether a and b name one file: the same resolved path,
// or the same inode (a hard link or a bind mount).
func samePath(a, b string) bool {
	if resolve(a) == resolve(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// resolve makes p absolute and resolves symlinks in its longest existing
// prefix, keeping the part that does not exist yet.
func resolve(p string) string {
	p, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}
