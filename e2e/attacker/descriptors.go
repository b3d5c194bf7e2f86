package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/announce"
	"fleetmesh.org/fleetmesh/descriptor"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
)

// descriptorFlood publishes t.seed node announcements (spec/announce.md)
// to the relay at t.relay, each of a fresh DID listing 64 addresses that
// answer nothing (TEST-NET-1), from ten announcement keys, each newer than
// the last, so that the newest pages of the relay are the attacker's.
func descriptorFlood(ctx context.Context, t target) result {
	count := t.seed
	if count <= 0 {
		count = 1000
	}
	var keys []nostr.SecretKey
	for range 10 {
		var b [32]byte
		rand.Read(b[:])
		sk, err := nostr.SecretKeyFromBytes(b[:])
		if err != nil {
			return result{Got: "announcement key: " + err.Error()}
		}
		keys = append(keys, sk)
	}
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(t.from)}}).DialContext, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.DialContext(ctx, t.relay, http.Header{})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return result{Got: "connect: " + err.Error()}
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.NetConn().Close() })
	defer stop()
	start := time.Now()
	var ok, refused int64
	for i := 0; i < count && ctx.Err() == nil; i++ {
		k, err := identity.GenerateKey()
		if err != nil {
			break
		}
		var addrs []string
		for p := range 64 {
			addrs = append(addrs, fmt.Sprintf("/ip4/192.0.2.%d/tcp/%d/p2p/%s", i%250+1, 1000+p, k.PeerID()))
		}
		at := start.Add(time.Duration(i) * time.Millisecond)
		sd, err := descriptor.Sign(k, descriptor.Descriptor{DID: k.DID(), Class: descriptor.ClassAnchor, Seq: 1,
			IssuedAt: at.Unix(), Expires: at.Add(24 * time.Hour).Unix(), Addresses: descriptor.Addresses{Libp2p: addrs}}, descriptor.DefaultLimits())
		if err != nil {
			break
		}
		ev, err := announce.NewEvent(keys[i%len(keys)], sd, at.Unix())
		if err != nil {
			break
		}
		cm := nostr.ClientMessage{Type: nostr.MsgEvent, Event: ev}
		if err := ws.WriteMessage(websocket.TextMessage, cm.AppendJSON(nil)); err != nil {
			break
		}
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return result{Got: fmt.Sprintf("%d descriptors published, %d refused, then: %v", ok, refused, err), Counts: map[string]int64{"published": ok, "refused": refused}}
			}
			m, err := nostr.ParseRelayMessage(data)
			if err != nil || m.Type != nostr.MsgOK || m.EventID != ev.ID {
				continue
			}
			if m.OK {
				ok++
			} else {
				refused++
			}
			break
		}
	}
	return result{Got: fmt.Sprintf("%d descriptors published from 10 keys, %d refused", ok, refused), Counts: map[string]int64{"published": ok, "refused": refused}}
}
