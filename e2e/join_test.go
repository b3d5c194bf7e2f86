package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The join tests start a node with no bootstrap peer and nothing in its
// config but a way in: a join code printed by `fleetmesh invite`, or a
// Nostr relay nobody here wrote where nodes announce themselves
// (spec/invite.md, spec/announce.md). Each ends with an event published
// at the first node read at the new one, through the mesh.

// joinConfig turns mDNS off explicitly, so the new node can find the
// other by nothing but its --join.
const joinConfig = meshConfig + "mdns = false\n"

// inviteJSON is what `fleetmesh invite --json` prints.
type inviteJSON struct {
	Code    string    `json:"code"`
	Link    string    `json:"link"`
	DID     string    `json:"did"`
	Addrs   []string  `json:"addrs"`
	Expires time.Time `json:"expires"`
	Source  string    `json:"source"`
}

// startJoiner starts a node whose only way into the mesh is --join.
func startJoiner(t *testing.T, home string, joins ...string) *meshNode {
	t.Helper()
	var args []string
	for _, j := range joins {
		args = append(args, "--join", j)
	}
	return startMeshNodeArgs(t, home, args...)
}

func TestJoinByInvite(t *testing.T) {
	needBinary(t)
	cfg := nodeConfig(nil) + joinConfig
	a := startMeshNode(t, newHome(t, cfg))

	out, errOut, err := cli(t, "invite", "--home", a.home, "--json")
	if err != nil {
		t.Fatalf("fleetmesh invite --json: %v\n%s", err, errOut)
	}
	var inv inviteJSON
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("invite --json printed %q: %v", out, err)
	}
	if inv.Source != "running" || inv.DID != a.did || !strings.HasPrefix(inv.Code, "fmjoin1") || inv.Link != "fleetmesh:"+inv.Code {
		t.Fatalf("invite of the running node: %+v (node %s)", inv, a.did)
	}
	if !slices.Contains(inv.Addrs, a.mesh) {
		t.Fatalf("invite lists %v, not the node's mesh line %s", inv.Addrs, a.mesh)
	}
	text, errOut, err := cli(t, "invite", "--home", a.home)
	if err != nil {
		t.Fatalf("fleetmesh invite: %v\n%s", err, errOut)
	}
	for _, want := range []string{"code    fmjoin1", "link    fleetmesh:fmjoin1", "█", "fleetmesh run --join fmjoin1"} {
		if !strings.Contains(text, want) {
			t.Fatalf("invite printed no %q:\n%s", want, text)
		}
	}

	// A changed code is refused before the node starts.
	tampered := []byte(inv.Code)
	tampered[len(tampered)/2] ^= 'q' ^ 'p'
	if _, errOut, err := cli(t, "run", "--home", newHome(t, cfg), "--listen", "127.0.0.1:0", "--join", string(tampered)); err == nil || !strings.Contains(errOut, "join code") {
		t.Fatalf("run --join with a changed code: %v\n%s", err, errOut)
	}

	b := startJoiner(t, newHome(t, cfg), inv.Link)
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	id := publishAt(t, a, u, randomContent("invited"))
	waitEverywhere(t, "joined by invite", []*meshNode{b}, []string{id})
}

// TestJoinThroughKhatru: node A announces itself on a khatru relay (a
// separate process); node B, with no bootstrap and only that relay's URL,
// finds A there and reads an event published at A.
func TestJoinThroughKhatru(t *testing.T) {
	needBinary(t)
	k := startBackend(t)
	cfg := nodeConfig(nil) + joinConfig + fmt.Sprintf("announce_relays = [%q]\n", k.url())
	a := startMeshNode(t, newHome(t, cfg))
	waitAnnounced(t, k.url(), a)
	// The announcement key is the home's own, readable by its owner only.
	if st, err := os.Stat(filepath.Join(a.home, "announce.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("announce.key: %v %v", st, err)
	}

	b := startJoiner(t, newHome(t, nodeConfig(nil)+joinConfig), k.url())
	if !strings.Contains(b.stderr.String(), "found=\"1 nodes") {
		t.Fatalf("node B found no node on %s\n%s", k.url(), b.output())
	}
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	id := publishAt(t, a, u, randomContent("announced"))
	waitEverywhere(t, "joined through khatru", []*meshNode{b}, []string{id})
}

// waitAnnounced polls the relay until it serves n's announcement.
func waitAnnounced(t *testing.T, relayURL string, n *meshNode) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		evs, err := query(ctx, relayURL, map[string]any{"kinds": []int{31166}, "#d": []string{n.did}})
		cancel()
		if err == nil && len(evs) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never served the announcement of %s (err %v)\n%s", relayURL, n.did, err, n.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
