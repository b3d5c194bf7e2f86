package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLeafAccountingReceipts: a `fleetmesh run` home with 2-second
// accounting windows and a `fleetmesh leaf --once` leaf that picks up in
// one window and wakes again only after two more have closed. Its next
// wake co-signs the receipt, and `fleetmesh receipts --home HOME --node
// LEAF_DID --verify` verifies the leaf's chain at the home, with the
// pickups counted on both sides, and the events its catch-up fetched on
// the relay connection its DPoP proof named counted alike (events and
// bytes) by the node and the leaf.
func TestLeafAccountingReceipts(t *testing.T) {
	home := newHome(t, accountingConfig)
	n := startNode(t, home)
	homeDID := runID(t, home).DID
	url := "http://" + strings.TrimPrefix(n.url, "ws://") + "/didcomm"
	inv, errOut, err := cli(t, "didcomm", "invite", "--home", home, "--endpoint", url)
	if err != nil {
		t.Fatalf("didcomm invite: %v\n%s", err, errOut)
	}
	leafHome := newHome(t, "") // its node.key is the leaf's key
	author, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	filter := fmt.Sprintf(`{"authors":[%q]}`, author.pubHex)
	wake := func() map[string]any {
		t.Helper()
		out, errOut, err := cli(t, "leaf", "--home", leafHome, "--pair", strings.TrimSpace(inv), "--subscribe", filter, "--once", "--window", "2s", "--budget", "15s")
		if err != nil {
			t.Fatalf("leaf --once: %v\n%s", err, errOut)
		}
		var s map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &s); err != nil {
			t.Fatalf("summary %q: %v", out, err)
		}
		if e, _ := s["error"].(string); e != "" {
			t.Fatalf("wake: %s", out)
		}
		return s
	}
	wake() // mediation
	leafDID := runID(t, leafHome).DID
	sender := newHome(t, "")
	// Queue and pick up in the middle of a window, so both sides count
	// the pickup in the same one.
	time.Sleep(time.Until(time.Now().Truncate(2 * time.Second).Add(2*time.Second + 300*time.Millisecond)))
	c, err := dial(t.Context(), n.url)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		ev, err := author.sign(1, randomContent("for the leaf"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := publishOne(c, ev); err != nil || !ok.Accepted {
			t.Fatalf("publish: %v %+v", err, ok)
		}
	}
	c.Close()
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf(`{"type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":"%d"}}`, i)
		cmd := exec.Command(binary, "didcomm", "send", "--home", sender, "--to", leafDID, "--via", url)
		cmd.Stdin = strings.NewReader(msg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("didcomm send: %v\n%s", err, out)
		}
	}
	if s := wake(); s["picked_up"] != float64(3) || s["events_fetched"] != float64(2) {
		t.Fatalf("wake picked up %v and fetched %v, want 3 and 2", s["picked_up"], s["events_fetched"])
	}
	time.Sleep(5 * time.Second) // asleep over two window closes
	if s := wake(); s["receipts"] != float64(1) || s["receipts_left"] != float64(0) {
		t.Fatalf("wake after the closes: %v, want one receipt co-signed", s)
	}
	verifyReceipts(t, home, leafDID)
	rs := receipts(t, home, leafDID)
	if len(rs) != 1 {
		t.Fatalf("home holds %d receipts of the leaf, want 1", len(rs))
	}
	type side struct {
		Gave, Received struct {
			MediationMessages uint64 `json:"mediation_messages"`
			Events            uint64 `json:"events"`
			Bytes             uint64 `json:"bytes"`
		}
	}
	var full []struct {
		CountsA side   `json:"counts_a"`
		CountsB side   `json:"counts_b"`
		A       string `json:"a"`
	}
	out, _, err := cli(t, "receipts", "--home", home, "--node", leafDID, "--json")
	if err != nil || json.Unmarshal([]byte(out), &full) != nil || len(full) != 1 {
		t.Fatalf("receipts --json: %v %s", err, out)
	}
	homeSide, leafSide := full[0].CountsA, full[0].CountsB
	if full[0].A == leafDID {
		homeSide, leafSide = leafSide, homeSide
	}
	if homeSide.Gave.MediationMessages != 3 || leafSide.Received.MediationMessages != 3 {
		t.Fatalf("home gave %d, leaf received %d mediated messages, want 3 each (home %s)", homeSide.Gave.MediationMessages, leafSide.Received.MediationMessages, homeDID)
	}
	if homeSide.Gave.Events != 2 || homeSide.Gave != leafSide.Received || homeSide.Gave.Bytes == 0 {
		t.Fatalf("home gave %+v, leaf received %+v: want the 2 fetched events and their bytes on both sides", homeSide.Gave, leafSide.Received)
	}
}
