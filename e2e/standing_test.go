package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// standingJSON is the part of `fleetmesh standing --json` these tests read.
type standingJSON struct {
	DID             string  `json:"did"`
	Standing        float64 `json:"standing"`
	VerifiedWindows int     `json:"verified_windows"`
	Counterparties  int     `json:"counterparties"`
}

func standingAt(t *testing.T, home string) map[string]standingJSON {
	t.Helper()
	out, errOut, err := cli(t, "standing", "--home", home, "--json")
	if err != nil {
		t.Fatalf("fleetmesh standing: %v\n%s", err, errOut)
	}
	var es []standingJSON
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		t.Fatalf("fleetmesh standing --json printed %q: %v", out, err)
	}
	m := map[string]standingJSON{}
	for _, e := range es {
		m[e.DID] = e
	}
	return m
}

// TestStandingFromVerifiedWindows: three node processes with 2-second
// windows exchange events; each then gives the other two standing from
// verified windows (`fleetmesh standing --json`: did, standing,
// verified_windows), and /metrics counts the recomputations. Then a
// newcomer joins with no standing anywhere: it can still publish (its
// event reaches the three) and sync (it gets an event published before
// it joined), within the default limits.
func TestStandingFromVerifiedWindows(t *testing.T) {
	cfg := accountingConfig + "\n[standing]\nrecompute = '2s'\nwalks = 2000\n"
	homes := []string{newHome(t, cfg), newHome(t, cfg), newHome(t, cfg)}
	x := startMeshNode(t, homes[0])
	nodes := []*meshNode{x, startMeshNode(t, homes[1], x.mesh), startMeshNode(t, homes[2], x.mesh)}
	for i, n := range nodes {
		n.did = runID(t, homes[i]).DID
	}
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for w := range 3 {
		for i, n := range nodes {
			ids = append(ids, publishAt(t, n, u, fmt.Sprintf("standing %d %d", w, i)))
		}
		waitEverywhere(t, "events", nodes, ids)
	}
	deadline := time.Now().Add(90 * time.Second)
	for i, n := range nodes {
		for {
			view := standingAt(t, homes[i])
			ok := true
			for _, o := range nodes {
				if o != n && (view[o.did].Standing <= 0 || view[o.did].VerifiedWindows < 1) {
					ok = false
				}
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d's view: %+v\n%s", i, view, n.output())
			}
			time.Sleep(time.Second)
		}
	}
	out, _, err := cli(t, "standing", "--home", homes[0], "--of", nodes[1].did)
	if err != nil {
		t.Fatalf("fleetmesh standing --of: %v", err)
	}
	t.Logf("fleetmesh standing --of:\n%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fams, err := metrics(ctx, x.node)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sample(fams, "fleetmesh_standing_recomputations_total", "", ""); !ok || v < 1 {
		t.Fatalf("fleetmesh_standing_recomputations_total = %v (%v)", v, ok)
	}

	nh := newHome(t, cfg)
	newcomer := startMeshNode(t, nh, x.mesh)
	newcomer.did = runID(t, nh).DID
	for i := range nodes {
		if s := standingAt(t, homes[i])[newcomer.did].Standing; s != 0 {
			t.Fatalf("node %d gives the newcomer standing %v before it served anything", i, s)
		}
	}
	waitEverywhere(t, "the newcomer's event", nodes, []string{publishAt(t, newcomer, u, "newcomer")})
	waitEverywhere(t, "an event from before the newcomer joined", []*meshNode{newcomer}, ids[:1])
}
