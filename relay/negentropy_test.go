package relay

import (
	"encoding/hex"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/negentropy"
	"fleetmesh.org/fleetmesh/nostr"
)

func TestNIP77Sync(t *testing.T) {
	tr := newTestRelay(t, nil)
	k, _ := nostr.GenerateSecretKey()
	c := tr.dial()
	var mine []negentropy.Item
	relayOnly := map[[32]byte]bool{}
	for i := range 40 {
		ev := signed(t, k, 1, nil, strings.Repeat("x", i))
		ev.CreatedAt -= int64(i)
		k.Sign(ev)
		if i%3 != 0 {
			if ok, msg := c.publish(ev); !ok {
				t.Fatal(msg)
			}
			relayOnly[ev.ID] = true
		}
		if i%2 == 0 {
			mine = append(mine, negentropy.Item{Timestamp: uint64(ev.CreatedAt), ID: ev.ID})
			delete(relayOnly, ev.ID)
		}
	}
	vec, err := negentropy.NewVector(mine)
	if err != nil {
		t.Fatal(err)
	}
	in, err := negentropy.NewInitiator(vec, negentropy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := in.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	c.send("NEG-OPEN", "n", map[string]any{"kinds": []int{1}}, hex.EncodeToString(msg))
	need := map[[32]byte]bool{}
	for rounds := 0; ; rounds++ {
		if rounds > 20 {
			t.Fatal("no convergence")
		}
		m := c.read()
		if m[0] != "NEG-MSG" {
			t.Fatalf("got %v", m)
		}
		raw, _ := hex.DecodeString(m[2].(string))
		step, err := in.Reconcile(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range step.Need {
			need[id] = true
		}
		if step.Done() {
			break
		}
		c.send("NEG-MSG", "n", hex.EncodeToString(step.Next))
	}
	c.send("NEG-CLOSE", "n")
	if len(need) != len(relayOnly) {
		t.Fatalf("need %d ids, relay has %d the client lacks", len(need), len(relayOnly))
	}
	for id := range relayOnly {
		if !need[id] {
			t.Fatalf("missing %x", id)
		}
	}
	c.send("NEG-MSG", "gone", "61")
	if m := c.read(); m[0] != "NEG-ERR" || !strings.HasPrefix(m[2].(string), "closed:") {
		t.Fatalf("NEG-MSG without session: %v", m)
	}
	c.send("NEG-OPEN", "bad", map[string]any{}, "zz")
	if m := c.read(); m[0] != "NEG-ERR" || !strings.HasPrefix(m[2].(string), "invalid:") {
		t.Fatalf("bad hex: %v", m)
	}
}
