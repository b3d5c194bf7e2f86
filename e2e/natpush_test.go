//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestRelayedPush measures, in the NAT lab with hole punching off at both
// homes, how long an event published at home A takes to reach home B when
// the homes' only connection runs through the anchor's circuit relay and
// the anchor subscribes to nothing and stores nothing (so no GossipSub
// path exists: GossipSub opens no streams over a limited, relayed
// connection). The homes' push over the sync protocol must carry it; the
// delay is logged and recorded in docs/benchmarks/mesh.md, never asserted
// (the poll's deadline only keeps a broken node from hanging the suite).
func TestRelayedPush(t *testing.T) {
	needBinary(t)
	lab, anchorNS, homeA, homeB, _ := newNATLab(t)
	anchor := startLabNodeWith(t, lab, anchorNS, natNodeConfig+"subscribe = []\noffer_storage = false\n")
	boot := []string{
		fmt.Sprintf("/ip4/%s/udp/4001/quic-v1/p2p/%s", labAnchorIP, anchor.peerID),
		fmt.Sprintf("/ip4/%s/tcp/4001/p2p/%s", labAnchorIP, anchor.peerID),
	}
	homeCfg := natNodeConfig + "hole_punching = false\n"
	a := startLabNodeWith(t, lab, homeA, homeCfg, boot...)
	b := startLabNodeWith(t, lab, homeB, homeCfg, boot...)
	deadline := time.Now().Add(natTestBudget)
	poll := func(what string, cond func(ctx context.Context) bool) {
		t.Helper()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ok := cond(ctx)
			cancel()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s\n--- home A:\n%s\n--- home B:\n%s", what, natTestBudget, a.output(), b.output())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, h := range []*labNode{a, b} {
		poll(h.ns+" is private and holds a reservation at the anchor", func(ctx context.Context) bool {
			d, err := h.debug(ctx)
			return err == nil && d.Reachability == "private" && slices.Contains(d.Relays, anchor.peerID)
		})
	}
	poll("the homes connect through the relay", func(ctx context.Context) bool {
		d, err := a.debug(ctx)
		if err != nil {
			return false
		}
		for _, c := range d.Connections {
			if c.Peer == b.peerID {
				return c.Relayed
			}
		}
		return false
	})

	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	var delays []time.Duration
	for i := range 3 {
		id := a.publish(t, u, randomContent(fmt.Sprint("through the relay ", i)))
		published := time.Now()
		poll("home B serves the event", func(ctx context.Context) bool {
			ok, _ := b.serves(ctx, id)
			return ok
		})
		delays = append(delays, time.Since(published))
	}
	t.Logf("relayed only (hole punching off, no GossipSub path): event at home B %v after publishing at home A", delays)
}
