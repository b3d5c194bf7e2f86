package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// meshNode is a running node with its mesh address.
type meshNode struct {
	*node
	mesh string // a multiaddr ending in /p2p/<PeerID>
}

const meshConfig = "\n[mesh]\nsync_interval = \"2s\"\nmaintain_interval = \"1s\"\n"

func startMeshNode(t *testing.T, home string, bootstrap ...string) *meshNode {
	t.Helper()
	return startMeshNodeArgs(t, home, bootstrapFlags(bootstrap)...)
}

// bootstrapFlags is run's --bootstrap flag for each address.
func bootstrapFlags(addrs []string) []string {
	var flags []string
	for _, a := range addrs {
		flags = append(flags, "--bootstrap", a)
	}
	return flags
}

// startMeshNodeArgs is startMeshNode with run's other flags.
func startMeshNodeArgs(t *testing.T, home string, flags ...string) *meshNode {
	t.Helper()
	args := append([]string{"--mesh-listen", "/ip4/127.0.0.1/tcp/0"}, flags...)
	n, err := tryStartNode(t, home, "127.0.0.1:0", args...)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(n.stdout.String(), "\n") {
			if a, ok := strings.CutPrefix(line, "mesh "); ok {
				return &meshNode{node: n, mesh: strings.TrimSpace(a)}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("fleetmesh run printed no mesh address\n%s", n.output())
	return nil
}

// waitEverywhere polls REQ by id at every node until each serves every id.
func waitEverywhere(t *testing.T, what string, nodes []*meshNode, ids []string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for _, n := range nodes {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			found, err := fetchIDs(ctx, n.url, ids, 100)
			cancel()
			if err == nil && len(found) == len(ids) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: node %s serves %d of %d events (err %v)\n%s", what, n.url, len(found), len(ids), err, n.output())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// waitAddrBook polls a node's saved address book until it lists at least
// n peers.
func waitAddrBook(t *testing.T, n *meshNode, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var book struct {
			Peers []json.RawMessage `json:"peers"`
		}
		data, err := os.ReadFile(filepath.Join(n.home, "mesh", "addrbook.json"))
		if err == nil && json.Unmarshal(data, &book) == nil && len(book.Peers) >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the address book of %s lists %d peers, want %d\n%s", n.url, len(book.Peers), want, n.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func publishAt(t *testing.T, n *meshNode, u *user, content string) string {
	t.Helper()
	ev, err := u.sign(1, content, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok, err := publishOne(c, ev)
	if err != nil || !ok.Accepted {
		t.Fatalf("publish at %s: %+v %v", n.url, ok, err)
	}
	return ev.ID
}

// TestMeshWithoutBootstrapNodes is the seed's conformance test: ten node
// processes meet through two bootstrap nodes; the bootstrap nodes are
// stopped and left out of every later start; events published at random
// nodes reach every node, a node restarted with no bootstrap at all finds
// the mesh from its address book and catches up, and a new node that knows
// only one surviving peer joins and serves every event.
func TestMeshWithoutBootstrapNodes(t *testing.T) {
	needBinary(t)
	r := rand.New(rand.NewPCG(7, 7))
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	cfg := nodeConfig(nil) + meshConfig
	boot := []*meshNode{startMeshNode(t, newHome(t, cfg)), startMeshNode(t, newHome(t, cfg))}
	bootAddrs := []string{boot[0].mesh, boot[1].mesh}
	var nodes []*meshNode
	for range 8 {
		nodes = append(nodes, startMeshNode(t, newHome(t, cfg), bootAddrs...))
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, publishAt(t, nodes[r.IntN(len(nodes))], u, fmt.Sprint("before ", i)))
	}
	waitEverywhere(t, "with bootstrap nodes", append(nodes, boot...), ids)
	// The node restarted below must have met peers beyond the bootstrap
	// nodes, or nothing could bring it back once they are gone.
	waitAddrBook(t, nodes[0], 3)

	for _, b := range boot {
		if err := b.stop(); err != nil {
			t.Fatalf("stop bootstrap node: %v", err)
		}
	}
	// A node restarted with no --bootstrap must find the mesh from its
	// address book; events published while it is down reach it on return.
	restarted := nodes[0]
	if err := restarted.stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ids = append(ids, publishAt(t, nodes[1+r.IntN(len(nodes)-1)], u, fmt.Sprint("after ", i)))
	}
	nodes[0] = startMeshNode(t, restarted.home)
	ids = append(ids, publishAt(t, nodes[r.IntN(len(nodes))], u, "after restart"))
	waitEverywhere(t, "without bootstrap nodes", nodes, ids)

	joiner := startMeshNode(t, newHome(t, cfg), nodes[5].mesh)
	waitEverywhere(t, "a new node knowing one surviving peer", []*meshNode{joiner}, ids)
}
