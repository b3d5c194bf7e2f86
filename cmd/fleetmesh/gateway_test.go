package main

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/identity"
)

// TestGatewayRefusesSharing runs `fleetmesh gateway` on homes that share
// something with the backend side: each must exit non-zero, say what is
// shared and what to change, and open neither the store nor a port.
func TestGatewayRefusesSharing(t *testing.T) {
	type env struct {
		home, data string // data: a backend data directory beside the home
		key        *identity.Key
	}
	write := func(t *testing.T, path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gatewayToml := func(t *testing.T, e env, lines ...string) {
		t.Helper()
		write(t, filepath.Join(e.home, "gateway.toml"), strings.Join(lines, "\n")+"\n")
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, e env)
		want  []string
		code  int
	}{
		{"backend data is the home", func(t *testing.T, e env) {
			gatewayToml(t, e, `backend_data_dir = "`+e.home+`"`)
		}, []string{"share a directory", "node home", "backend_data_dir"}, 1},
		{"home inside the backend data", func(t *testing.T, e env) {
			gatewayToml(t, e, `backend_data_dir = "`+filepath.Dir(e.home)+`"`)
		}, []string{"share a directory", "one contains the other"}, 1},
		{"backend data inside the home", func(t *testing.T, e env) {
			gatewayToml(t, e, `backend_data_dir = "khatru"`)
		}, []string{"share a directory", "home/khatru"}, 1},
		{"event store inside the backend data", func(t *testing.T, e env) {
			write(t, filepath.Join(e.home, "config.toml"), "class = \"home\"\n[store]\ndir = \""+filepath.Join(e.data, "store")+"\"\n")
			gatewayToml(t, e, `backend_data_dir = "`+e.data+`"`)
		}, []string{"share a directory", "event store"}, 1},
		{"backend key is the node key file", func(t *testing.T, e env) {
			gatewayToml(t, e, `backend_key_file = "node.key"`)
		}, []string{"share a key file", "backend_key_file"}, 1},
		{"backend key is a hard link to the node key", func(t *testing.T, e env) {
			if err := os.Link(filepath.Join(e.home, "node.key"), filepath.Join(e.home, "auth.key")); err != nil {
				t.Fatal(err)
			}
			gatewayToml(t, e, `backend_key_file = "auth.key"`)
		}, []string{"share a key file"}, 1},
		{"backend key inside the backend data", func(t *testing.T, e env) {
			gatewayToml(t, e, `backend_data_dir = "`+e.data+`"`, `backend_key_file = "`+filepath.Join(e.data, "gateway.key")+`"`)
		}, []string{"share a file", "backend key file", "inside the backend's data directory"}, 1},
		{"backend secret is the mesh seed", func(t *testing.T, e env) {
			write(t, filepath.Join(e.home, "backend.key"), hex.EncodeToString(e.key.PrivateKey().Seed())+"\n")
		}, []string{"share a secret", "mesh key's Ed25519 seed", "delete the backend key file"}, 1},
		{"gateway.toml is config.toml", func(t *testing.T, e env) {
			if err := os.Symlink("config.toml", filepath.Join(e.home, "gateway.toml")); err != nil {
				t.Fatal(err)
			}
		}, []string{"share a config file"}, 1},
		{"plain ws to a remote backend", func(t *testing.T, e env) {
			gatewayToml(t, e, `backend = "ws://relay.example.org"`)
		}, []string{"ws:// is allowed only on loopback"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			e := env{home: filepath.Join(root, "home"), data: filepath.Join(root, "backend-data")}
			if code, _, stderr := runCLI(t, "", "init", "--home", e.home); code != 0 {
				t.Fatalf("init: %d %s", code, stderr)
			}
			if err := os.MkdirAll(e.data, 0o700); err != nil {
				t.Fatal(err)
			}
			k, err := identity.LoadKey(filepath.Join(e.home, "node.key"))
			if err != nil {
				t.Fatal(err)
			}
			e.key = k
			tc.setup(t, e)
			args := []string{"gateway", "--home", e.home, "--listen", "127.0.0.1:0", "--carry-everything"}
			if !strings.Contains(tc.name, "remote") {
				args = append(args, "--backend", "ws://127.0.0.1:9")
			}
			code, _, stderr := runCLI(t, "", args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			t.Log(strings.TrimSpace(stderr))
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(e.home, "data")); err == nil {
				t.Error("a refused gateway opened its store")
			}
			if _, err := os.Stat(filepath.Join(e.data, "gateway.key")); err == nil {
				t.Error("a refused gateway created a key in the backend's data")
			}
		})
	}
}
