package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/internal/nodeinterop"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/identity"
)

// TestInteropForwardFromDidcommNode: a sender using didcomm-node wraps its
// message for a leaf in a routing 2.0 forward to the leaf's fleetmesh
// mediator (Message.wrap_in_forward, as didcomm-rust does for a DID whose
// service lists routing keys); the mediator queues it and the leaf picks
// it up and reads it.
func TestInteropForwardFromDidcommNode(t *testing.T) {
	svc, key := newService(t, t.TempDir())
	defer svc.Close()
	ex := func(ctx context.Context, packed []byte) ([]byte, error) { return svc.Handle(ctx, packed) }
	leaf, sender := newPeer(t), newPeer(t)
	client := &mediation.Client{Packer: leaf.packer, Unpacker: leaf.unpacker, Mediator: key.DID(), Exchange: ex}
	ctx := context.Background()
	if _, err := client.RequestMediation(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateRecipients(ctx, mediation.Update{RecipientDID: leaf.key.DID(), Action: "add"}); err != nil {
		t.Fatal(err)
	}
	routingKey, err := identity.KeyAgreementID(key.DID())
	if err != nil {
		t.Fatal(err)
	}
	var reqs []map[string]any
	want := map[string]bool{}
	for i := 0; i < 3; i++ {
		m, _ := didcomm.NewMessage("https://didcomm.org/basicmessage/2.0/message", map[string]string{"content": fmt.Sprint("from js ", i)})
		m.From, m.To = sender.key.DID(), []string{leaf.key.DID()}
		want[m.ID] = true
		reqs = append(reqs, map[string]any{"message": m, "routing_keys": []string{routingKey}})
	}
	var fwds []json.RawMessage
	nodeinterop.Run(t, map[string]any{
		"op":       "forward",
		"docs":     nodeinterop.Docs(t, sender.key.DID(), leaf.key.DID(), key.DID()),
		"secrets":  nodeinterop.Secrets(t, sender.key),
		"requests": reqs,
	}, &fwds)
	for i, f := range fwds {
		var packed string
		if err := json.Unmarshal(f, &packed); err != nil {
			t.Fatalf("didcomm-node could not wrap %d: %s", i, f)
		}
		out, err := svc.Handle(ctx, []byte(packed))
		if err != nil || out != nil {
			t.Fatalf("mediator refused didcomm-node's forward: %v %s", err, out)
		}
	}
	got := 0
	_, err = client.Collect(ctx, 10, func(id string, packed []byte) error {
		u, err := leaf.unpacker.Unpack(packed)
		if err != nil {
			return err
		}
		if !want[u.Message.ID] || u.Message.From != sender.key.DID() || !u.Authenticated {
			return fmt.Errorf("unexpected message %+v", u.Message)
		}
		delete(want, u.Message.ID)
		got++
		return nil
	})
	if err != nil || got != 3 || len(want) != 0 {
		t.Fatalf("leaf got %d of 3 (%v): %v", got, want, err)
	}
}
