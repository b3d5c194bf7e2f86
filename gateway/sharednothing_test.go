package gateway

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestCheckPaths(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	data := filepath.Join(root, "backend")
	for _, d := range []string{home, data} {
		os.MkdirAll(d, 0o700)
	}
	os.WriteFile(filepath.Join(home, "node.key"), []byte("k"), 0o600)
	os.Symlink(data, filepath.Join(root, "backend-link"))
	os.Symlink(filepath.Join(home, "node.key"), filepath.Join(root, "key-link"))
	base := Sides{
		MeshSide: MeshSide{
			Home:       home,
			KeyFile:    filepath.Join(home, "node.key"),
			ConfigFile: filepath.Join(home, "config.toml"),
			StoreDir:   filepath.Join(home, "data"),
		},
		GatewayConfig:  filepath.Join(home, "gateway.toml"),
		BackendKeyFile: filepath.Join(home, "backend.key"),
		BackendDataDir: data,
	}
	cases := []struct {
		name   string
		change func(s *Sides)
		shared bool
	}{
		{"separate", func(*Sides) {}, false},
		{"no backend data dir", func(s *Sides) { s.BackendDataDir = "" }, false},
		{"sibling with a common prefix", func(s *Sides) { s.BackendDataDir = home + "-backend" }, false},
		{"same dir", func(s *Sides) { s.BackendDataDir = home }, true},
		{"same dir with a trailing dot", func(s *Sides) { s.BackendDataDir = home + "/." }, true},
		{"home inside data", func(s *Sides) { s.BackendDataDir = root }, true},
		{"data inside home", func(s *Sides) { s.BackendDataDir = filepath.Join(home, "khatru") }, true},
		{"data dir through a symlink", func(s *Sides) { s.Home = filepath.Join(root, "backend-link", "gw") }, true},
		{"store inside data", func(s *Sides) { s.StoreDir = filepath.Join(data, "events") }, true},
		{"backend key in data", func(s *Sides) { s.BackendKeyFile = filepath.Join(data, "k") }, true},
		{"backend key is mesh key", func(s *Sides) { s.BackendKeyFile = s.KeyFile }, true},
		{"backend key symlinks to mesh key", func(s *Sides) { s.BackendKeyFile = filepath.Join(root, "key-link") }, true},
		{"config files one path", func(s *Sides) { s.GatewayConfig = s.ConfigFile }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.change(&s)
			err := CheckPaths(s)
			if got := errors.Is(err, ErrShared); got != tc.shared {
				t.Fatalf("CheckPaths = %v, want shared=%v", err, tc.shared)
			}
		})
	}
}

func TestCheckSecrets(t *testing.T) {
	seed := make([]byte, 32)
	seed[0] = 9
	if err := CheckSecrets(seed, append([]byte(nil), seed...)); !errors.Is(err, ErrShared) {
		t.Fatalf("equal secrets: %v", err)
	}
	other := append([]byte(nil), seed...)
	other[31] = 1
	if err := CheckSecrets(seed, other); err != nil {
		t.Fatalf("different secrets: %v", err)
	}
}

func TestBackendKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backend.key")
	k1, s1, err := LoadOrCreateBackendKey(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	k2, s2, err := LoadOrCreateBackendKey(path)
	if err != nil || string(s1) != string(s2) || k1.PubKey() != k2.PubKey() {
		t.Fatal("the key changed on reload")
	}
	os.Chmod(path, 0o644)
	if _, _, err := LoadOrCreateBackendKey(path); err == nil {
		t.Fatal("a world-readable key was accepted")
	}
	os.Chmod(path, 0o600)
	os.WriteFile(path, []byte("nothex\n"), 0o600)
	if _, _, err := LoadOrCreateBackendKey(path); err == nil {
		t.Fatal("a malformed key was accepted")
	}
}

// TestBackendKeyRace: callers racing to create the key all get the one
// that was written.
func TestBackendKeyRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backend.key")
	const n = 8
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, keys[i], errs[i] = LoadOrCreateBackendKey(path)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("caller %d: %x %v; caller 0 got %x", i, keys[i], errs[i], keys[0])
		}
	}
}

// TestPrepare runs the whole pre-start sequence: a home that shares nothing
// gets its settings and a fresh backend key; one whose backend key would
// be the node key is refused before any key file is written; a bad
// setting is a *SettingsError.
func TestPrepare(t *testing.T) {
	newHome := func(t *testing.T, gatewayToml string) MeshSide {
		t.Helper()
		home := t.TempDir()
		m := MeshSide{
			Home:       home,
			KeyFile:    filepath.Join(home, "node.key"),
			Seed:       bytes.Repeat([]byte{7}, 32),
			ConfigFile: filepath.Join(home, "config.toml"),
			StoreDir:   filepath.Join(home, "data"),
		}
		for path, text := range map[string]string{m.KeyFile: "node key", m.ConfigFile: "", filepath.Join(home, ConfigFile): gatewayToml} {
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}

	m := newHome(t, "")
	s, key, err := Prepare(m, Overrides{Backend: "ws://127.0.0.1:1", CarryEverything: true})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if s.Backend != "ws://127.0.0.1:1" || key.PubKey() == ([32]byte{}) {
		t.Fatalf("settings %+v, key %x", s, key.PubKey())
	}
	if _, err := os.Stat(s.BackendKeyFile); err != nil {
		t.Fatalf("backend key file: %v", err)
	}

	m = newHome(t, "backend_data_dir = \"khatru\"\n")
	if _, _, err := Prepare(m, Overrides{Backend: "ws://127.0.0.1:1", CarryEverything: true}); !errors.Is(err, ErrShared) {
		t.Fatalf("backend data inside the home: %v, want ErrShared", err)
	}
	if _, err := os.Stat(filepath.Join(m.Home, DefaultBackendKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused gateway wrote its backend key: %v", err)
	}

	m = newHome(t, "backend = \"http://127.0.0.1:1\"\n")
	var se *SettingsError
	if _, _, err := Prepare(m, Overrides{CarryEverything: true}); !errors.As(err, &se) || !strings.Contains(err.Error(), "ws://") {
		t.Fatalf("an http backend: %v, want a *SettingsError saying what to write", err)
	}
}
