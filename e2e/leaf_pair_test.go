package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestLeafPairsWithJoinCode pairs a `fleetmesh leaf` with a running node
// through the join code `fleetmesh invite` printed for it (the code a
// node joins with), and wakes: the wake gets mediation and fetches the
// event published at the node. `didcomm invite` finds the same endpoint
// without being told it.
func TestLeafPairsWithJoinCode(t *testing.T) {
	a := startMeshNode(t, newHome(t, nodeConfig(nil)+joinConfig))
	endpoint := "http://" + strings.TrimPrefix(a.url, "ws://") + "/didcomm"

	out, errOut, err := cli(t, "invite", "--home", a.home, "--json")
	if err != nil {
		t.Fatalf("fleetmesh invite --json: %v\n%s", err, errOut)
	}
	var inv struct {
		Code     string `json:"code"`
		Endpoint string `json:"endpoint"`
	}
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("invite --json printed %q: %v", out, err)
	}
	if inv.Endpoint != endpoint {
		t.Fatalf("the code carries endpoint %q, want the node's %q", inv.Endpoint, endpoint)
	}
	text, errOut, err := cli(t, "invite", "--home", a.home, "--no-qr")
	if err != nil || !strings.Contains(text, "didcomm "+endpoint) {
		t.Fatalf("fleetmesh invite does not print the endpoint: %v\n%s%s", err, text, errOut)
	}
	oobURL, errOut, err := cli(t, "didcomm", "invite", "--home", a.home)
	if err != nil || !strings.HasPrefix(oobURL, endpoint+"?_oob=") {
		t.Fatalf("didcomm invite without --endpoint: %v\n%s%s", err, oobURL, errOut)
	}

	author, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(t.Context(), a.url)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := author.sign(1, randomContent("for the leaf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := publishOne(c, ev); err != nil || !ok.Accepted {
		t.Fatalf("publish: %v %+v", err, ok)
	}
	c.Close()

	leafHome := newHome(t, "")
	filter := fmt.Sprintf(`{"authors":[%q]}`, author.pubHex)
	out, errOut, err = cli(t, "leaf", "--home", leafHome, "--pair", inv.Code, "--subscribe", filter, "--once", "--budget", "20s")
	if err != nil {
		t.Fatalf("leaf --pair CODE --once: %v\n%s", err, errOut)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if e, _ := s["error"].(string); e != "" {
		t.Fatalf("the wake failed: %s", out)
	}
	if s["events_fetched"] != float64(1) {
		t.Fatalf("the wake fetched %v events, want the 1 published at the node: %s", s["events_fetched"], out)
	}
}
