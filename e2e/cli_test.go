package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"fleetmesh.org/fleetmesh/identity"
)

// idOutput is what `fleetmesh id` prints.
type idOutput struct {
	DID        string `json:"did"`
	PeerID     string `json:"peer_id"`
	EndpointID string `json:"endpoint_id"`
	Class      string `json:"class"`
}

func runID(t *testing.T, home string) idOutput {
	t.Helper()
	out, errOut, err := cli(t, "id", "--home", home)
	if err != nil {
		t.Fatalf("fleetmesh id: %v\n%s", err, errOut)
	}
	var id idOutput
	if err := json.Unmarshal([]byte(out), &id); err != nil {
		t.Fatalf("fleetmesh id printed %q, not JSON: %v", out, err)
	}
	return id
}

func TestInitCreatesKeyAndConfig(t *testing.T) {
	needBinary(t)
	home := filepath.Join(t.TempDir(), "a", "home")
	if _, errOut, err := cli(t, "init", "--home", home); err != nil {
		t.Fatalf("init: %v\n%s", err, errOut)
	}
	st, err := os.Stat(filepath.Join(home, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key mode %o, want 600", st.Mode().Perm())
	}
	cfg, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Class string `toml:"class"`
	}
	if err := toml.Unmarshal(cfg, &parsed); err != nil {
		t.Fatalf("config.toml is not TOML: %v\n%s", err, cfg)
	}
	if parsed.Class != "auto" {
		t.Errorf("config.toml class %q, want the default auto:\n%s", parsed.Class, cfg)
	}
}

func TestInitIdempotentNeverOverwritesKey(t *testing.T) {
	needBinary(t)
	home := filepath.Join(t.TempDir(), "home")
	if _, errOut, err := cli(t, "init", "--home", home, "--class", "anchor"); err != nil {
		t.Fatalf("init: %v\n%s", err, errOut)
	}
	key1, _ := os.ReadFile(filepath.Join(home, "node.key"))
	cfg1, _ := os.ReadFile(filepath.Join(home, "config.toml"))
	id1 := runID(t, home)
	for _, tc := range []struct {
		args []string
		fail string // what stderr must say; "" for success
	}{
		{args: []string{"init", "--home", home}},
		{args: []string{"init", "--home", home, "--class", "anchor"}},
		// A different class is not applied, and init says so.
		{args: []string{"init", "--home", home, "--class", "leaf"}, fail: "--class leaf not applied"},
	} {
		args := tc.args
		out, errOut, err := cli(t, args...)
		switch {
		case tc.fail == "" && err != nil:
			t.Fatalf("%v: %v\n%s", args, err, errOut)
		case tc.fail != "" && (err == nil || !strings.Contains(errOut, tc.fail) || !strings.Contains(errOut, "class = 'leaf'")):
			t.Fatalf("%v: err %v, stderr %q; want a non-zero exit saying %q and what to set", args, err, errOut, tc.fail)
		case tc.fail == "" && len(args) > 3 && !strings.Contains(out, "class anchor, as config.toml already says"):
			t.Fatalf("%v printed %q; want it to say the class is already anchor", args, out)
		}
		key2, _ := os.ReadFile(filepath.Join(home, "node.key"))
		if !bytes.Equal(key1, key2) {
			t.Fatalf("%v overwrote the key", args)
		}
		if id2 := runID(t, home); id2.DID != id1.DID {
			t.Fatalf("%v changed the DID: %s -> %s", args, id1.DID, id2.DID)
		}
	}
	cfg2, _ := os.ReadFile(filepath.Join(home, "config.toml"))
	if !bytes.Equal(cfg1, cfg2) {
		t.Errorf("init on an existing home rewrote config.toml:\nbefore:\n%s\nafter:\n%s", cfg1, cfg2)
	}
	st, _ := os.Stat(filepath.Join(home, "node.key"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key mode %o after re-init, want 600", st.Mode().Perm())
	}
}

func TestIDJSON(t *testing.T) {
	needBinary(t)
	for _, class := range []string{"anchor", "home", "leaf", "auto"} {
		t.Run(class, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			if _, errOut, err := cli(t, "init", "--home", home, "--class", class); err != nil {
				t.Fatalf("init: %v\n%s", err, errOut)
			}
			id := runID(t, home)
			if id.Class != class {
				t.Errorf("class %q, want %q", id.Class, class)
			}
			// The three names must be the same key, and the key in node.key.
			pub, err := identity.PublicKeyFromDID(id.DID)
			if err != nil || !strings.HasPrefix(id.DID, "did:key:z6Mk") {
				t.Fatalf("did %q: %v", id.DID, err)
			}
			pid, err := identity.PeerIDFromPublicKey(pub)
			if err != nil || pid.String() != id.PeerID || !strings.HasPrefix(id.PeerID, "12D3KooW") {
				t.Errorf("peer_id %q, want %s (%v)", id.PeerID, pid, err)
			}
			if want := identity.EndpointIDFromPublicKey(pub); id.EndpointID != want {
				t.Errorf("endpoint_id %q, want %q", id.EndpointID, want)
			}
			k, err := identity.LoadKey(filepath.Join(home, "node.key"))
			if err != nil || k.DID() != id.DID {
				t.Errorf("node.key holds %v (%v), id printed %s", k, err, id.DID)
			}
		})
	}
}

func TestInitRefusesUnknownClass(t *testing.T) {
	needBinary(t)
	home := filepath.Join(t.TempDir(), "home")
	_, errOut, err := cli(t, "init", "--home", home, "--class", "server")
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("init --class server: err %v, want a non-zero exit", err)
	}
	if !strings.Contains(errOut, "server") {
		t.Errorf("error does not name the bad class: %q", errOut)
	}
}

func TestIDRefusesWorldReadableKey(t *testing.T) {
	home := newHome(t, "")
	if err := os.Chmod(filepath.Join(home, "node.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := cli(t, "id", "--home", home)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("id with a 0644 key: err %v, want a non-zero exit", err)
	}
	if strings.TrimSpace(errOut) == "" {
		t.Error("refusal printed no message")
	}
}

func TestRunPrintsURLAndDID(t *testing.T) {
	home := newHome(t, nodeConfig(nil))
	n := startNode(t, home)
	want := runID(t, home).DID
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(n.stdout.String(), "did "+want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(n.stdout.String(), "did "+want) {
		t.Errorf("run did not print `did %s`:\n%s", want, n.output())
	}
	if err := n.stop(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if st, err := os.Stat(filepath.Join(home, "data")); err != nil || !st.IsDir() {
		t.Errorf("store dir %q (relative to the home) was not created: %v", "data", err)
	}
}

func TestIDOnMissingHome(t *testing.T) {
	needBinary(t)
	_, errOut, err := cli(t, "id", "--home", filepath.Join(t.TempDir(), "nothing-here"))
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("id on a missing home: err %v, want a non-zero exit", err)
	}
	if strings.TrimSpace(errOut) == "" {
		t.Error("no message for a missing home")
	}
}

// TestConformanceCLI runs `fleetmesh conformance` against a running node:
// every check passes, the summary line says so, and the suite's events are
// gone afterwards (it deletes them; they also carry an expiration).
func TestConformanceCLI(t *testing.T) {
	n := startNode(t, newHome(t, ""))
	out, errOut, err := cli(t, "conformance", "--target", n.url)
	if err != nil {
		t.Fatalf("fleetmesh conformance: %v\n%s\n%s", err, out, errOut)
	}
	if !strings.Contains(out, "conformance: all ") || !strings.Contains(out, "ok   cleanup-deletes-its-events") {
		t.Fatalf("no summary or clean-up line:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	left, err := query(ctx, n.url, map[string]any{"kinds": []int{1, 7, 10078, 30078}})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the suite left %d events behind", len(left))
	}
	_, errOut, err = cli(t, "conformance", "--help")
	if err != nil || !strings.Contains(errOut, "NIP-40") || !strings.Contains(errOut, "NIP-09") {
		t.Fatalf("conformance --help does not say what it leaves behind: %v\n%s", err, errOut)
	}
}

// TestSecondNodeOnOneHome: a second `fleetmesh run` on a home a node is
// running on is refused with the first node's pid, not a store error.
func TestSecondNodeOnOneHome(t *testing.T) {
	home := newHome(t, "")
	first := startNode(t, home)
	_, errOut, err := cli(t, "run", "--home", home, "--listen", "127.0.0.1:0")
	want := "home in use by another node (pid " + strconv.Itoa(first.cmd.Process.Pid) + ")"
	if err == nil || !strings.Contains(errOut, want) {
		t.Fatalf("second run on one home: %v\n%s\nwant %q", err, errOut, want)
	}
}
