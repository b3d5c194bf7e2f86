package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/meter"
)

// TestMediationMeteredAndGranted: a pickup's messages are mediation the
// node gave the leaf; an authcrypted forward is mediation given to its
// sender, an anoncrypted one (a routing forward's usual form) to nobody;
// and the queue grant refuses a forward once the leaf's queue holds its
// quota, with queue-full and the grant's words.
func TestMediationMeteredAndGranted(t *testing.T) {
	svc, key := newService(t, t.TempDir())
	defer svc.Close()
	m := meter.New(key.PeerID(), time.Hour, time.Now())
	svc.SetMeter(m)
	const quota = 3
	svc.SetQueueGrant(func(leaf string, queued int) error {
		if queued+1 > quota {
			return fmt.Errorf("rate-limited: over grant g1 (a queue of %d mediation_messages, %d queued)", quota, queued)
		}
		return nil
	})
	srv := httptest.NewServer(svc)
	defer srv.Close()
	leaf, sender := newPeer(t), newPeer(t)
	client := &mediation.Client{Packer: leaf.packer, Unpacker: leaf.unpacker, Mediator: key.DID(), Exchange: httpExchange(srv.URL)}
	ctx := context.Background()
	if _, err := client.RequestMediation(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateRecipients(ctx, mediation.Update{RecipientDID: leaf.key.DID(), Action: "add"}); err != nil {
		t.Fatal(err)
	}
	forward := func(i int, mode didcomm.Mode) ([]byte, error) {
		msg, _ := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": fmt.Sprint("msg ", i)})
		msg.To = []string{leaf.key.DID()}
		inner, err := sender.packer.Pack(msg, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
		if err != nil {
			t.Fatal(err)
		}
		fwd, err := routing.Wrap(inner, leaf.key.DID(), key.DID())
		if err != nil {
			t.Fatal(err)
		}
		if mode == didcomm.ModeAuthcrypt {
			fwd.From = sender.key.DID()
		}
		packed, err := sender.packer.Pack(fwd, didcomm.PackOptions{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return transport.PostHTTP(ctx, http.DefaultClient, srv.URL, packed)
	}
	if _, err := forward(0, didcomm.ModeAnoncrypt); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < quota; i++ {
		if _, err := forward(i, didcomm.ModeAuthcrypt); err != nil {
			t.Fatal(err)
		}
	}
	out, err := forward(quota, didcomm.ModeAuthcrypt)
	if err == nil {
		t.Fatal("a forward beyond the queue grant was queued")
	}
	u, uerr := sender.unpacker.Unpack(out)
	if uerr != nil || problemCodeOf(t, u) != didcomm.CodeQueueFull || !strings.Contains(string(u.Message.Body), "over grant g1") {
		t.Fatalf("refusal: %v %s", uerr, out)
	}
	n, err := client.Collect(ctx, 10, func(string, []byte) error { return nil })
	if err != nil || n != quota {
		t.Fatalf("picked up %d (%v), want %d", n, err, quota)
	}
	sides := m.Current().Sides()
	if got := sides[leaf.key.PeerID()].Gave.MediationMessages; got != quota {
		t.Fatalf("gave the leaf %d mediation messages, want %d picked up", got, quota)
	}
	if got := sides[sender.key.PeerID()].Gave.MediationMessages; got != quota-1 {
		t.Fatalf("gave the sender %d, want its %d authcrypted forwards queued", got, quota-1)
	}
}
