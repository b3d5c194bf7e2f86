package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/identity"
)

// forwards packs n forwards of fresh messages to t.leaf through t.node,
// from a sender made here.
func forwards(t target, n int) ([][]byte, error) {
	k, err := identity.GenerateKey()
	if err != nil {
		return nil, err
	}
	s, err := didcomm.SecretsFromKey(k)
	if err != nil {
		return nil, err
	}
	p := &didcomm.Packer{Secrets: s, Resolver: didcomm.DIDKeyResolver{}}
	out := make([][]byte, n)
	for i := range out {
		m, err := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": fmt.Sprint("flood ", i)})
		if err != nil {
			return nil, err
		}
		m.To = []string{t.leaf}
		inner, err := p.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAnoncrypt})
		if err != nil {
			return nil, err
		}
		if out[i], err = routing.Route(p, inner, t.leaf, t.node); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func didcommFlood(ctx context.Context, t target) result {
	fwds, err := forwards(t, 64)
	if err != nil {
		return result{Got: "could not pack forwards: " + err.Error()}
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(t.from)}}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16}}
	defer hc.CloseIdleConnections()
	url := t.http + "/didcomm"
	var mu sync.Mutex
	status := map[int]int64{}
	var failed int64
	start := time.Now()
	workers(ctx, 16, func(ctx context.Context, w int) {
		for i := 0; ctx.Err() == nil; i++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(fwds[(w*7+i)%len(fwds)]))
			req.Header.Set("Content-Type", didcomm.MediaTypeEncrypted)
			res, err := hc.Do(req)
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				pause(ctx, 10*time.Millisecond)
				continue
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			mu.Lock()
			status[res.StatusCode]++
			mu.Unlock()
		}
	})
	secs := int64(time.Since(start).Seconds() + 1)
	return result{
		Got:    fmt.Sprintf("%d forwards queued for one recipient; 429: %d, 503: %d, other: %d, failed: %d", status[202], status[429], status[503], status[400], failed),
		Counts: map[string]int64{"queued": status[202], "refused": status[429] + status[503], "seconds": secs},
	}
}
