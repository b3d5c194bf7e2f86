package accounting

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/grant"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
)

// TestGranteeCannotChangeGrant: x gives y a grant; every message y can
// send x under the grant protocol (an offer reusing the grant's id, with
// y as grantor or posing as x, a revocation, an accept, a decline)
// leaves x's record of it as it was, and x still holds y to its quota.
func TestGranteeCannotChangeGrant(t *testing.T) {
	cfg := testConfig()
	cfg.RequireGrant = []meter.Service{meter.Events}
	nodes := newNodes(t, 2, cfg, nil)
	x, y := nodes[0], nodes[1]
	g, err := x.s.Offer(context.Background(), y.key.DID(), meter.Events, 5, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := g.Encode()
	reuse := grant.New(y.key.DID(), x.key.DID(), meter.Events, 1<<40, window, time.Now(), time.Hour, 0)
	reuse.ID = g.ID
	if err := reuse.Sign(y.key); err != nil {
		t.Fatal(err)
	}
	reuseRaw, _ := reuse.Encode()
	// The grant as x gave it, its quota raised by y: x's signature no
	// longer holds, and y can sign it only as grantee.
	posing := *g.Grant
	posing.Quota, posing.SigGrantee = 1<<40, nil
	if err := posing.Sign(y.key); err != nil {
		t.Fatal(err)
	}
	posingRaw, _ := posing.Encode()
	for _, m := range []struct {
		typ  string
		body any
	}{
		{grant.TypeOffer, grant.OfferBody{Grant: reuseRaw}},
		{grant.TypeOffer, grant.OfferBody{Grant: before}},
		{grant.TypeOffer, grant.OfferBody{Grant: posingRaw}},
		{grant.TypeRevoke, grant.RevokeBody{ID: g.ID, EffectiveAt: 1}},
		{grant.TypeAccept, grant.AcceptBody{Grant: before}},
		{grant.TypeDecline, grant.DeclineBody{ID: g.ID, Reason: "gone"}},
	} {
		send(x, y.key, m.typ, m.body)
	}
	var given []GrantInfo
	gs, _ := x.s.Grants()
	for _, gi := range gs {
		if gi.Direction == "given" {
			given = append(given, gi)
		}
	}
	if len(given) != 1 || given[0].State != StateActive || given[0].RevokedAt != 0 {
		t.Fatalf("x's grants given after y's messages: %+v", given)
	}
	if after, _ := given[0].Encode(); !bytes.Equal(after, before) {
		t.Fatal("x's record of the grant changed")
	}
	x.s.meter.Record(y.h.ID(), meter.Events, meter.Gave, 5)
	if err := x.s.Allow(y.h.ID(), meter.Events, 1); err == nil {
		t.Fatal("y is served past its quota")
	}
	// After a restart (the index is rebuilt from the bucket) too.
	x.close()
	x.open(t, cfg)
	x.s.meter.Record(y.h.ID(), meter.Events, meter.Gave, 5)
	if err := x.s.Allow(y.h.ID(), meter.Events, 1); err == nil {
		t.Fatal("after a restart y is served past its quota")
	}
	// Only x revokes it, with its notice.
	if _, err := x.s.Revoke(context.Background(), g.ID); err != nil {
		t.Fatal(err)
	}
}

// TestGrantOffersBounded: offers are kept up to MaxGrantsPerPeer from one
// grantor and MaxGrants in all; ended grants make room; the rest are
// declined and not stored.
func TestGrantOffersBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxGrantsPerPeer, cfg.MaxGrants = 3, 5
	nodes := newNodes(t, 1, cfg, nil)
	n := nodes[0]
	offer := func(from *identity.Key, start time.Time) string {
		t.Helper()
		g := grant.New(from.DID(), n.key.DID(), meter.Events, 10, window, start, time.Hour, 0)
		if err := g.Sign(from); err != nil {
			t.Fatal(err)
		}
		raw, _ := g.Encode()
		out, err := send(n, from, grant.TypeOffer, grant.OfferBody{Grant: raw})
		if err != nil {
			t.Fatal(err)
		}
		return out.Type
	}
	now := time.Now()
	p1, p2, p3 := mustKey(t), mustKey(t), mustKey(t)
	for i := range 3 {
		if got := offer(p1, now.Add(-2*time.Hour)); got != grant.TypeAccept {
			t.Fatalf("ended offer %d: %s", i, got)
		}
	}
	// p1 is at its bound with ended grants: they make room.
	if got := offer(p1, now); got != grant.TypeAccept {
		t.Fatalf("offer with ended grants held: %s", got)
	}
	for range 2 {
		offer(p1, now)
	}
	if got := offer(p1, now); got != grant.TypeDecline {
		t.Fatalf("p1's offer past max_grants_per_peer: %s", got)
	}
	if got := stored(t, n, bGrants, p1.DID()); got != 3 {
		t.Fatalf("%d grants of p1 kept, want 3", got)
	}
	for i := range 2 {
		if got := offer(p2, now); got != grant.TypeAccept {
			t.Fatalf("p2's offer %d: %s", i, got)
		}
	}
	if got := offer(p3, now); got != grant.TypeDecline {
		t.Fatalf("p3's offer past max_grants: %s", got)
	}
	if got := stored(t, n, bGrants, ""); got != cfg.MaxGrants {
		t.Fatalf("%d grants kept, want %d", got, cfg.MaxGrants)
	}
}

// TestGrantOffersBoundedConcurrently: offers from many grantors at once
// cannot pass the bounds together.
func TestGrantOffersBoundedConcurrently(t *testing.T) {
	cfg := testConfig()
	cfg.MaxGrantsPerPeer, cfg.MaxGrants = 3, 10
	nodes := newNodes(t, 1, cfg, nil)
	n := nodes[0]
	type offer struct {
		from *identity.Key
		body grant.OfferBody
	}
	var offers [8][]offer
	for w := range offers {
		k := mustKey(t)
		for range 6 {
			g := grant.New(k.DID(), n.key.DID(), meter.Events, 10, window, time.Now(), time.Hour, 0)
			if err := g.Sign(k); err != nil {
				t.Fatal(err)
			}
			raw, _ := g.Encode()
			offers[w] = append(offers[w], offer{k, grant.OfferBody{Grant: raw}})
		}
	}
	var wg sync.WaitGroup
	for w := range offers {
		wg.Go(func() {
			for _, o := range offers[w] {
				send(n, o.from, grant.TypeOffer, o.body)
			}
		})
	}
	wg.Wait()
	if got := stored(t, n, bGrants, ""); got != cfg.MaxGrants {
		t.Fatalf("%d grants kept, want %d", got, cfg.MaxGrants)
	}
	for w := range offers {
		if got := stored(t, n, bGrants, offers[w][0].from.DID()); got > cfg.MaxGrantsPerPeer {
			t.Fatalf("%d grants of one grantor kept, want at most %d", got, cfg.MaxGrantsPerPeer)
		}
	}
}
