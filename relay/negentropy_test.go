package relay

import (
	"encoding/hex"
	"fmt"
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

// TestNegOpenCharged checks that a NEG-OPEN's listing is charged to its
// address: reserved in full before it runs (max_negentropy_records rows)
// and settled with the rows it read, so that a second session goes ahead
// but the address's next one, in debt by then, is refused rate-limited.
func TestNegOpenCharged(t *testing.T) {
	// 10 rows a second with a burst of 40; each listing reads 45 rows.
	tr := newTestRelay(t, func(c *Config) { c.IPReqRowsPerSecond, c.MaxNegRecords = 10, 1000 })
	k, _ := nostr.GenerateSecretKey()
	pub := tr.dial()
	for i := range 45 {
		if ok, msg := pub.publish(signed(t, k, 1, nil, fmt.Sprint(i))); !ok {
			t.Fatal(msg)
		}
	}
	open := func(c *client, id string) []any {
		vec, _ := negentropy.NewVector(nil)
		in, _ := negentropy.NewInitiator(vec, negentropy.Config{})
		msg, _ := in.Initiate()
		c.send("NEG-OPEN", id, map[string]any{"kinds": []int{1}}, hex.EncodeToString(msg))
		m := c.read()
		c.send("NEG-CLOSE", id)
		return m
	}
	c := tr.dial()
	// The first leaves the address 5 rows in debt. Had its reservation of
	// 1,001 rows not been given back, the second would be refused.
	for _, id := range []string{"a", "b"} {
		if m := open(c, id); m[0] != "NEG-MSG" {
			t.Fatalf("NEG-OPEN %s: %v", id, m)
		}
	}
	// Now 45 rows in debt: 4.5 s, over the 2 s a request may wait.
	if m := open(tr.dial(), "c"); m[0] != "NEG-ERR" || !strings.HasPrefix(m[2].(string), "rate-limited:") {
		t.Fatalf("third NEG-OPEN from the address: %v, want NEG-ERR rate-limited", m)
	}
}
