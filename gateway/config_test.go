package gateway

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadConfigWritesDefaultsOnce(t *testing.T) {
	home := t.TempDir()
	cfg, err := LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, DefaultConfig()) {
		t.Fatalf("the default file reads as %+v, want DefaultConfig %+v", cfg, DefaultConfig())
	}
	path := filepath.Join(home, ConfigFile)
	custom := "backend = \"wss://relay.example.org\"\nto_mesh = [{ kinds = [1] }]\nto_backend = [{}]\n"
	if err := os.WriteFile(path, []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err = LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != custom {
		t.Fatal("LoadConfig rewrote an existing gateway.toml")
	}
	s, err := cfg.Settings(home)
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend != "wss://relay.example.org" || len(s.ToMesh[0].Kinds) != 1 || s.ToBackend[0].Kinds != nil {
		t.Fatalf("settings: %+v", s)
	}
	if s.BackendKeyFile != filepath.Join(home, DefaultBackendKeyFile) || s.RetryMax != 30*time.Second || s.Overlap != 10*time.Minute {
		t.Fatalf("settings defaults: %+v", s)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, toml, want string
	}{
		{"unknown key", "bakend = \"x\"\n", "unknown key"},
		{"no backend", "", "no backend"},
		{"http backend", `backend = "http://127.0.0.1:1"`, "want a ws:// or wss://"},
		{"remote ws", `backend = "ws://10.0.0.1:7000"`, "only on loopback"},
		{"empty filters", "backend = \"ws://127.0.0.1:1\"\nto_mesh = []\n", "to_mesh is empty"},
		{"bad filter key", "backend = \"ws://127.0.0.1:1\"\nto_backend = [{ kind = [1] }]\n", "unknown filter key \"kind\""},
		{"limit in filter", "backend = \"ws://127.0.0.1:1\"\nto_backend = [{ limit = 5 }]\n", "\"limit\" has no meaning"},
		{"bad kinds", "backend = \"ws://127.0.0.1:1\"\nto_mesh = [{ kinds = [\"one\"] }]\n", "to_mesh[0] is not a NIP-01 filter"},
		{"bad duration", "backend = \"ws://127.0.0.1:1\"\noverlap = \"ten minutes\"\n", `overlap: "ten minutes": write a duration`},
		{"negative duration", "backend = \"ws://127.0.0.1:1\"\noverlap = \"-1m\"\n", "overlap = -1m is not a non-negative duration"},
		{"number for a duration", "backend = \"ws://127.0.0.1:1\"\npublish_timeout = 10\n", `publish_timeout: "10": write a duration`},
		{"bad retry_min", "backend = \"ws://127.0.0.1:1\"\nretry_min = \"soon\"\n", `retry_min: "soon"`},
		{"bad retry_max", "backend = \"ws://127.0.0.1:1\"\nretry_max = \"soon\"\n", `retry_max: "soon"`},
		{"bad publish_timeout", "backend = \"ws://127.0.0.1:1\"\npublish_timeout = \"soon\"\n", `publish_timeout: "soon"`},
		{"backwards retry", "backend = \"ws://127.0.0.1:1\"\nretry_min = \"1m\"\nretry_max = \"1s\"\n", "retry_min"},
		{"zero queue", "backend = \"ws://127.0.0.1:1\"\nqueue_size = 0\n", "queue_size"},
		{"no filters", "backend = \"ws://127.0.0.1:1\"\n", "does not say what crosses to_mesh (backend → mesh) or to_backend (mesh → backend)"},
		{"no to_backend", "backend = \"ws://127.0.0.1:1\"\nto_mesh = [{}]\n", "does not say what crosses to_backend (mesh → backend): write NIP-01 filters"},
		{"carry_everything and filters", "backend = \"ws://127.0.0.1:1\"\ncarry_everything = true\nto_backend = [{ kinds = [1] }]\n", "carry_everything (or --carry-everything) and to_backend are both set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(tc.toml), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(home)
			if err == nil {
				_, err = cfg.Settings(home)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestTagFilterFromTOML(t *testing.T) {
	home := t.TempDir()
	text := "backend = \"ws://[::1]:7000\"\nto_mesh = [{ kinds = [] }]\nto_backend = [{ \"#t\" = [\"fleetmesh\"], since = 100 }]\n"
	if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.Settings(home)
	if err != nil {
		t.Fatal(err)
	}
	f := s.ToBackend[0]
	if f.Since != 100 || len(f.Tags["t"]) != 1 || f.Tags["t"][0] != "fleetmesh" {
		t.Fatalf("filter %+v", f)
	}
}

// TestDescribe checks the start-up lines that say what crosses each way.
func TestDescribe(t *testing.T) {
	cases := []struct {
		name, toml string
		want       []string
	}{
		{"carry everything", "carry_everything = true\n", []string{
			"to_mesh (backend → mesh): everything the boundary policy allows",
			"to_backend (mesh → backend): everything the boundary policy allows"}},
		{"filters", "to_mesh = [{ kinds = [1] }, { \"#t\" = [\"public\"] }]\nto_backend = [{ kinds = [] }]\n", []string{
			`to_mesh (backend → mesh): events matching {"kinds":[1]} or {"#t":["public"]}, if the boundary policy allows`,
			"to_backend (mesh → backend): nothing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte("backend = \"ws://127.0.0.1:1\"\n"+tc.toml), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(home)
			if err != nil {
				t.Fatal(err)
			}
			s, err := cfg.Settings(home)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Describe(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Describe() = %q, want %q", got, tc.want)
			}
		})
	}
}
