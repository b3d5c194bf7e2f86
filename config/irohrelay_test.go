package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIrohRelayKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(path, []byte("[iroh]\nrelay_max_clients = 7\nserve_relay = false\nrelay_url = \"https://a.example/\"\n"), 0o644)
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Iroh.RelayMaxClients != 7 || got.Iroh.ServeRelay || got.Iroh.RelayURL != "https://a.example/" || got.Iroh.RelayQueueFrames != 512 {
		t.Fatalf("got %+v", got.Iroh.IrohRelayConfig)
	}
	os.WriteFile(path, []byte("[iroh]\nrelay_queue_frames = 0\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "relay_queue_frames") {
		t.Fatalf("err %v, want one naming relay_queue_frames", err)
	}
}
