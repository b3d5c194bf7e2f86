package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/problemreport"
	"fleetmesh.org/fleetmesh/didcomm/routing"
)

// clientFrom is an HTTP client whose connections leave from the local
// address ip, as a sender on another machine.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestForwardFloodOneRecipient checks that one address forwarding to one
// recipient without end is refused with 429, Retry-After and
// e.p.me.res.rate-limited after its share, that the recipient's queue is
// not filled by it, and that another address still reaches the recipient.
func TestForwardFloodOneRecipient(t *testing.T) {
	svc, key := newService(t, t.TempDir())
	defer svc.Close()
	srv := httptest.NewServer(svc)
	defer srv.Close()
	url := srv.URL + "/didcomm"
	leaf, sender := newPeer(t), newPeer(t)
	seen, err := mediation.OpenSeen(t.TempDir(), mediation.DefaultMaxSeen)
	if err != nil {
		t.Fatal(err)
	}
	defer seen.Close()
	client := &mediation.Client{Packer: leaf.packer, Unpacker: leaf.unpacker, Mediator: key.DID(), Exchange: httpExchange(url), Seen: seen}
	ctx := context.Background()
	if _, err := client.RequestMediation(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateRecipients(ctx, mediation.Update{RecipientDID: leaf.key.DID(), Action: "add"}); err != nil {
		t.Fatal(err)
	}
	post := func(hc *http.Client, i int) *http.Response {
		m, _ := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": fmt.Sprint("flood ", i)})
		m.To = []string{leaf.key.DID()}
		inner, err := sender.packer.Pack(m, didcomm.PackOptions{Mode: didcomm.ModeAnoncrypt})
		if err != nil {
			t.Fatal(err)
		}
		fwd, err := routing.Route(sender.packer, inner, leaf.key.DID(), key.DID())
		if err != nil {
			t.Fatal(err)
		}
		res, err := hc.Post(url, didcomm.MediaTypeEncrypted, bytes.NewReader(fwd))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	lim := DefaultLimits()
	flood := clientFrom("127.0.0.1")
	accepted, refused := 0, 0
	start := time.Now()
	for i := 0; i < lim.AddrRecipientBurst*3; i++ {
		switch res := post(flood, i); res.StatusCode {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			refused++
			if res.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("forward %d: HTTP %d", i, res.StatusCode)
		}
	}
	// The bucket refills while the loop runs: the bound counts that.
	bound := lim.AddrRecipientBurst + int(lim.AddrRecipientPerSecond*time.Since(start).Seconds()) + 1
	if refused == 0 || accepted > bound {
		t.Fatalf("one address forwarded %d to one recipient (%d refused); its share is %d by now", accepted, refused, bound)
	}
	if res := post(clientFrom("127.0.0.2"), -1); res.StatusCode != http.StatusAccepted {
		t.Fatalf("another address's forward to the same recipient: HTTP %d", res.StatusCode)
	}
}

// TestRefusalIsCheap checks what an address over its POST bucket gets: a
// 429 with Retry-After, a problem report e.p.me.res.rate-limited with a
// fresh id each time, and Connection: close, so that a flood on kept-alive
// connections must reconnect for each refusal.
func TestRefusalIsCheap(t *testing.T) {
	svc, key := newService(t, t.TempDir())
	defer svc.Close()
	lim := DefaultLimits()
	lim.AddrPerSecond, lim.AddrBurst = 0.001, 1
	if err := svc.SetLimits(lim); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	hc := clientFrom("127.0.0.1")
	post := func() *http.Response {
		res, err := hc.Post(srv.URL, didcomm.MediaTypePlain, bytes.NewReader([]byte(`{}`)))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := post(); res.StatusCode == http.StatusTooManyRequests {
		t.Fatal("the first POST was refused")
	} else {
		res.Body.Close()
	}
	ids := map[string]bool{}
	for range 2 {
		res := post()
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !res.Close {
			t.Fatalf("over the bucket: HTTP %d, Retry-After %q, close %v; want 429, a Retry-After and Connection: close", res.StatusCode, res.Header.Get("Retry-After"), res.Close)
		}
		var m didcomm.Message
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("refusal is not a DIDComm message: %v\n%s", err, body)
		}
		pr, err := problemreport.Parse(&m)
		if err != nil || pr.Code != didcomm.CodeRateLimited || m.From != key.DID() {
			t.Fatalf("refusal report: %+v from %s (%v)", pr, m.From, err)
		}
		if ids[m.ID] || len(m.ID) != 32 || m.ID == placeholderID {
			t.Fatalf("refusal id %q is not fresh", m.ID)
		}
		ids[m.ID] = true
	}
}
