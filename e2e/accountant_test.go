package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting"
)

// accountantBounds are the accounting bounds of the node under attack,
// lowered so that the attack reaches them.
const accountantBounds = "max_grants_per_peer = 4\nmax_grants = 64\nmax_fork_proofs = 50\n"

// TestDishonestAccountant: two accounting node processes exchange
// receipts in 2-second windows while a dishonest accountant (e2e/attacker
// -attack accountant, a process of its own on libp2p hosts of its own)
// lies to one of them in every way the accounting protocols let it:
// figures inflated on its own side and on the node's, old windows
// replayed, windows from 1970 proposed and requested, fork proofs minted
// with two keys and with fresh ones, grant offers flooded, a grant id
// reused and revoked. Every lie is refused or bounded: no proposal of the
// attacker is signed, the node keeps no window, signed receipt or dispute
// of the attacker's DIDs, at most max_fork_proofs forkers and
// max_grants grants (max_grants_per_peer from one), and its receipts with
// the honest node, in the same windows, are all signed by both and
// verify.
func TestDishonestAccountant(t *testing.T) {
	needBinary(t)
	// Short: a bounded time. Full: at least 100,000 attack messages, in
	// at most the full duration.
	dur, messages := 20*time.Second, int64(0)
	if os.Getenv("FLEETMESH_HOSTILE_FULL") == "1" {
		dur, messages = 20*time.Minute, 100_000
	}
	x, y, xh, _, u := startPair(t, accountantBounds)
	bin := buildAttacker(t)
	env := &hostileEnv{t: t, n: x.node, mesh: x.mesh, node: x.did, seed: 2, attacker: bin}
	done := make(chan attackerResult, 1)
	go func() {
		done <- env.runProgram(dur, false, "-attack", "accountant", "-from", "127.0.0.41", "-messages", fmt.Sprint(messages))
	}()
	// Honest traffic both ways while the attack lasts.
	windows := map[int64]bool{}
	var res attackerResult
	var ids []string
	for i := 0; ; i++ {
		select {
		case res = <-done:
		case <-time.After(700 * time.Millisecond):
			from := []*meshNode{x, y}[i%2]
			windows[windowOf(time.Now())] = true
			ids = append(ids, publishAt(t, from, u, randomContent("honest")))
			continue
		}
		break
	}
	t.Logf("attacker: %s", res.Got)
	waitEverywhere(t, "honest events", []*meshNode{x, y}, ids)
	// Nothing the attacker proposed was signed.
	for k, n := range res.Counts {
		mode, answer, _ := strings.Cut(k, " ")
		if answer == "sign" && mode != "" {
			t.Errorf("the node signed %d proposals of mode %s", n, mode)
		}
	}
	if res.Counts["sent"] == 0 || res.Counts["sent"] < messages {
		t.Fatalf("the attacker sent %d messages, want at least %d: %s", res.Counts["sent"], max(1, messages), res.Got)
	}
	// The honest pair's windows are all receipted, signed by both, and
	// the chain verifies at both ends.
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := map[int64]bool{}
		for _, r := range receipts(t, xh, y.did) {
			if r.SigA != "" && r.SigB != "" && r.Settlement != nil {
				got[r.WindowStart] = true
			}
		}
		missing := []int64{}
		for w := range windows {
			if !got[w] {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("windows with honest traffic and no receipt signed by both at the attacked node: %v\n%s", missing, x.output())
		}
		time.Sleep(500 * time.Millisecond)
	}
	verifyReceipts(t, xh, x.did)
	verifyReceipts(t, xh, y.did)
	// The attacked node's accounting storage is within its bounds.
	if err := x.stop(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(xh, "accounting", accounting.DBFile), 0o600, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		count := func(bucket string, keep func(k []byte) bool) int {
			n := 0
			tx.Bucket([]byte(bucket)).ForEach(func(k, _ []byte) error {
				if keep(k) {
					n++
				}
				return nil
			})
			return n
		}
		honest := func(k []byte) bool { return bytes.Contains(k, []byte(y.did)) }
		stranger := func(k []byte) bool { return !honest(k) }
		for _, b := range []string{"pending", "signed", "disputed", "disputes", "receipts"} {
			if n := count(b, stranger); n != 0 {
				t.Errorf("%d entries of the attacker's DIDs in %s", n, b)
			}
		}
		if n := count("forkers", func([]byte) bool { return true }); n > 50 {
			t.Errorf("%d forkers kept, over max_fork_proofs 50", n)
		}
		if n := count("forks", func([]byte) bool { return true }); n > 50 {
			t.Errorf("%d fork proofs kept, over max_fork_proofs 50", n)
		}
		per := map[string]int{}
		received := count("grants", func(k []byte) bool {
			grantor, _, _ := bytes.Cut(k, []byte{0})
			if string(grantor) == x.did {
				return false
			}
			per[string(grantor)]++
			return true
		})
		if received > 64 {
			t.Errorf("%d grants received kept, over max_grants 64", received)
		}
		for g, n := range per {
			if n > 4 {
				t.Errorf("%d grants of %s kept, over max_grants_per_peer 4", n, g)
			}
		}
		t.Logf("after %d attack messages: %d fork proofs, %d grants received kept", res.Counts["sent"], count("forks", func([]byte) bool { return true }), received)
		return nil
	})
}

// TestJoinThroughFloodedRelay: a node announces itself on a khatru relay,
// then an attacker (e2e/attacker -attack descriptors) floods the relay
// with 1,000 newer descriptors from ten announcement keys, each listing
// 64 addresses that answer nothing. A newcomer whose only way in is that
// relay still joins the honest mesh: it reads an event the honest node
// publishes.
func TestJoinThroughFloodedRelay(t *testing.T) {
	needBinary(t)
	k := startBackend(t)
	a := startMeshNode(t, newHome(t, nodeConfig(nil)+joinConfig+fmt.Sprintf("announce_relays = [%q]\n", k.url())))
	a.did = runID(t, a.home).DID
	waitAnnounced(t, k.url(), a)
	env := &hostileEnv{t: t, n: a.node, mesh: a.mesh, node: a.did, seed: 1000, attacker: buildAttacker(t)}
	res := env.runProgram(3*time.Minute, false, "-attack", "descriptors", "-relay", k.url(), "-from", "127.0.0.42")
	if res.Counts["published"] < 1000 {
		t.Fatalf("the flood published %d descriptors: %s", res.Counts["published"], res.Got)
	}
	b := startJoiner(t, newHome(t, nodeConfig(nil)+joinConfig), k.url())
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	id := publishAt(t, a, u, randomContent("through the flood"))
	waitEverywhere(t, "joined through a flooded relay", []*meshNode{b}, []string{id})
}
