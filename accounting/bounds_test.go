package accounting

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting/exchange"
	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/grant"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
)

// send hands a message from the DID of key to one of n's handlers, as the
// agent would after unpacking it, and returns the answer or the problem.
func send(n *testNode, from *identity.Key, typ string, body any) (*didcomm.Message, error) {
	m, err := didcomm.NewMessage(typ, body)
	if err != nil {
		return nil, err
	}
	m.From = from.DID()
	u := &didcomm.Unpacked{Message: m, Authenticated: true}
	if bytes.HasPrefix([]byte(typ), []byte(grant.PIURI)) {
		return n.s.handleGrant(context.Background(), u)
	}
	return n.s.handleReceipt(context.Background(), u)
}

// keyBefore returns a fresh key whose DID sorts before (first) or after
// did, so that it is the pair's proposer or responder.
func keyBefore(t *testing.T, did string, first bool) *identity.Key {
	t.Helper()
	for {
		k, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		if (k.DID() < did) == first {
			return k
		}
	}
}

// stored counts the keys of bucket beginning with prefix.
func stored(t *testing.T, n *testNode, bucket []byte, prefix string) int {
	t.Helper()
	c := 0
	n.s.db.b.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucket).Cursor()
		for k, _ := cur.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, _ = cur.Next() {
			c++
		}
		return nil
	})
	return c
}

// TestWindowBounds: a proposal or a request for a window this node holds
// no figures for is refused, and leaves nothing stored, when the window's
// dispute period is over (1970) or it is before the pair's first contact
// (a DID never dealt with, or a window before the first one metered).
func TestWindowBounds(t *testing.T) {
	cfg := testConfig()
	cfg.DisputePeriod.Duration = 4 * window
	_, a, b := newPair(t, cfg)
	// b meters a in window t0 only; the window closes on b.
	b.s.meter.Record(a.h.ID(), meter.Events, meter.Received, 3)
	ctx := context.Background()
	b.s.Round(ctx, t0.Add(window+time.Millisecond))
	b.s.Round(ctx, t0.Add(window+2*time.Millisecond))
	stranger := keyBefore(t, b.key.DID(), true)
	secs := int64(window / time.Second)
	figures := receipt.Side{Gave: receipt.Counts{Events: 5}}
	for _, tc := range []struct {
		name   string
		from   *identity.Key
		window int64
		code   string
	}{
		{"1970 from the pair's proposer", a.key, 0, didcomm.CodeExpired},
		{"1970 from a stranger", stranger, 0, didcomm.CodeExpired},
		{"before first contact", a.key, t0.Unix() - secs, exchange.CodeInvalid},
		{"a stranger within the period", stranger, t0.Unix(), exchange.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, zero := range []bool{false, true} {
				side := figures
				if zero {
					side = receipt.Side{} // would be signed, not disputed
				}
				_, err := send(b, tc.from, exchange.TypePropose, proposeFirst(tc.window, secs, side))
				var pr *didcomm.Problem
				if !errors.As(err, &pr) || pr.Code != tc.code {
					t.Fatalf("proposal answered %v, want problem %s", err, tc.code)
				}
			}
			pair, _ := pairOf(b.key.DID(), tc.from.DID())
			if n := stored(t, b, bPending, string(key(tc.from.DID(), uint64(tc.window)))); n != 0 {
				t.Fatalf("%d pending windows stored", n)
			}
			if n := stored(t, b, bSigned, pair); n != 0 {
				t.Fatalf("%d signed receipts stored", n)
			}
		})
	}
	// A request (b's side asking a to propose) is held to the same bounds
	// on the proposer.
	asker := keyBefore(t, a.key.DID(), false)
	for _, w := range []int64{0, t0.Unix()} {
		if _, err := send(a, asker, exchange.TypeRequest, exchange.RequestBody{WindowStart: w}); err == nil {
			t.Fatalf("request for window %d from a stranger accepted", w)
		}
	}
	if n := stored(t, a, bPending, asker.DID()); n != 0 {
		t.Fatalf("a request stored %d pending windows", n)
	}
	// The window b metered is still proposed, and signed.
	out, err := send(b, a.key, exchange.TypePropose, proposeFirst(t0.Unix(), secs, receipt.Side{Gave: receipt.Counts{Events: 3}}))
	if err != nil || out.Type != exchange.TypeSign {
		t.Fatalf("the metered window: %v %v", out, err)
	}
}

// TestPairLocksExpire: every DID that writes takes a pair lock; none is
// held once its handler returns.
func TestPairLocksExpire(t *testing.T) {
	nodes := newNodes(t, 1, testConfig(), nil)
	n := nodes[0]
	secs := int64(window / time.Second)
	for range 200 {
		k := keyBefore(t, n.key.DID(), true)
		send(n, k, exchange.TypePropose, proposeFirst(0, secs, receipt.Side{}))
	}
	if held := n.s.pairsHeld(); held != 0 {
		t.Fatalf("%d pair locks held after the handlers returned", held)
	}
}

// fork mints a fork proof of the pair of x and y at seq: two co-signed
// receipts that differ.
func fork(t *testing.T, x, y *identity.Key, seq uint64) *receipt.ForkProof {
	t.Helper()
	a, b := receipt.Pair(x.DID(), y.DID())
	prev := cid.Undef
	if seq > 1 {
		prev, _ = receipt.New(a, b, t0.Unix()-10, 10, 1, cid.Undef, receipt.Side{}, receipt.Side{}).CID()
	}
	var rs [2]*receipt.Receipt
	for i := range rs {
		r := receipt.New(a, b, t0.Unix(), 10, seq, prev, receipt.Side{Gave: receipt.Counts{Events: uint64(i)}}, receipt.Side{})
		for _, k := range []*identity.Key{x, y} {
			if err := r.Sign(k); err != nil {
				t.Fatal(err)
			}
		}
		rs[i] = r
	}
	p, err := receipt.NewForkProof(rs[0], rs[1])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestForkProofsBounded: two keys mint proofs at will; a node keeps one
// per forker and MaxForkProofs forkers in all, and its handler returns
// whether or not the proof can be relayed.
func TestForkProofsBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxForkProofs = 6
	nodes := newNodes(t, 2, cfg, nil)
	n := nodes[0]
	// The relay worker stops: relaying can no longer finish, and the
	// handlers must not wait for it.
	n.s.stopRelay()
	n.s.relayWG.Wait()
	x, y := mustKey(t), mustKey(t)
	proof := func(p *receipt.ForkProof) {
		raw, _ := p.Encode()
		done := make(chan error, 1)
		go func() {
			_, err := send(n, x, exchange.TypeForkProof, ForkProofBody{Proof: raw})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the fork-proof handler waits for the relaying")
		}
	}
	for seq := uint64(1); seq <= 2*forkRelayQueue; seq++ {
		proof(fork(t, x, y, seq))
	}
	if got := stored(t, n, bForks, ""); got != 1 {
		t.Fatalf("%d proofs of one pair kept, want 1", got)
	}
	// Fresh forkers, from eight senders at once: the bound holds
	// however the stores interleave.
	var raws [][]byte
	for range 2 * forkRelayQueue {
		raw, _ := fork(t, mustKey(t), mustKey(t), 1).Encode()
		raws = append(raws, raw)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(raws); i += 8 {
				send(n, x, exchange.TypeForkProof, ForkProofBody{Proof: raws[i]})
			}
		})
	}
	wg.Wait()
	if got := stored(t, n, bForkers, ""); got != cfg.MaxForkProofs {
		t.Fatalf("%d forkers kept, want %d", got, cfg.MaxForkProofs)
	}
	if got := stored(t, n, bForks, ""); got > cfg.MaxForkProofs {
		t.Fatalf("%d proofs kept, want at most %d", got, cfg.MaxForkProofs)
	}
}

func mustKey(t *testing.T) *identity.Key {
	t.Helper()
	k, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// proposeFirst is the proposal of a pair's first receipt, round 1, of
// the window at start.
func proposeFirst(start, secs int64, side receipt.Side) exchange.ProposeBody {
	return exchange.ProposeBody{WindowStart: start, WindowSecs: secs, Seq: 1, Counts: side, Round: 1}
}

// TestContactKeepsALostFirstWindow: a node killed as its first window
// with a peer closed lost that window's figures, the only record of the
// pair it would have had; the peer's connection, noted as the pair's
// first contact, still lets the peer's proposal for that window in, to be
// disputed (spec/disputes.md), while a stranger's is refused as before.
func TestContactKeepsALostFirstWindow(t *testing.T) {
	cfg := testConfig()
	cfg.DisputePeriod.Duration = 4 * window
	_, a, b := newPair(t, cfg)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var noted bool
		if err := b.s.db.b.View(func(tx *bolt.Tx) error {
			_, noted = contactOf(tx, a.key.DID())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if noted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never noted its connection with a as a first contact")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	b.s.Round(ctx, t0.Add(window+time.Millisecond))
	b.s.Round(ctx, t0.Add(window+2*time.Millisecond))
	secs := int64(window / time.Second)
	// b holds no figures of window t0 (it "lost" them): a's proposal is
	// taken in, not refused as before the pair's first contact.
	if _, err := send(b, a.key, exchange.TypePropose, proposeFirst(t0.Unix(), secs, receipt.Side{Gave: receipt.Counts{Events: 5}})); err != nil {
		t.Fatalf("proposal for the lost first window refused: %v", err)
	}
	var pr *didcomm.Problem
	stranger := keyBefore(t, b.key.DID(), true)
	if _, err := send(b, stranger, exchange.TypePropose, proposeFirst(t0.Unix(), secs, receipt.Side{Gave: receipt.Counts{Events: 5}})); !errors.As(err, &pr) || pr.Code != exchange.CodeInvalid {
		t.Fatalf("a stranger's proposal answered %v, want problem %s", err, exchange.CodeInvalid)
	}
}
