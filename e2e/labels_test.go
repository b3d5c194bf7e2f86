package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/label"
	"fleetmesh.org/fleetmesh/nostr"
)

// publishMsg publishes ev at n and returns its OK.
func publishMsg(t *testing.T, n *meshNode, ev *event) okMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok, err := publishOne(c, ev)
	if err != nil {
		t.Fatalf("publish at %s: %v", n.url, err)
	}
	return ok
}

// spam is a new kind 1 event by u.
func spam(t *testing.T, u *user, content string) *event {
	t.Helper()
	ev, err := u.sign(1, content, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// whyAt runs `fleetmesh why --json` at home.
func whyAt(t *testing.T, home string, args ...string) (why struct {
	Refused  bool             `json:"refused"`
	Author   string           `json:"author"`
	Verdicts []*label.Verdict `json:"verdicts"`
}) {
	t.Helper()
	out, errOut, err := cli(t, append([]string{"why", "--home", home, "--json"}, args...)...)
	if err != nil {
		t.Fatalf("fleetmesh why: %v\n%s", err, errOut)
	}
	if err := json.Unmarshal([]byte(out), &why); err != nil {
		t.Fatalf("fleetmesh why --json printed %q: %v", out, err)
	}
	return why
}

var hexID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestLabelsRefuseAcrossTheMesh: four node processes with 2-second
// windows serve each other until each gives the others standing. A
// fresh identity (a node key no one has receipts of) labels a spammer
// at the two nodes that judge: nothing changes at either. Two nodes
// with standing then label the spammer (`fleetmesh label --author
// PUBKEY --reason spam`, which prints the label's id); the third,
// configured with [labels] policy = "refuse", answers the spammer's
// next events `OK false` "blocked: …" as soon as the labels reach it
// over the mesh (within 60 s), and `fleetmesh why --event ID` names the
// two labellers; the fourth, with the default policy (count), keeps
// accepting them. /metrics at the third counts the refusal by rule.
func TestLabelsRefuseAcrossTheMesh(t *testing.T) {
	cfg := accountingConfig + "\n[standing]\nrecompute = '2s'\nwalks = 2000\n"
	refuse := cfg + "\n[labels]\npolicy = 'refuse'\n"
	homes := []string{newHome(t, cfg), newHome(t, cfg), newHome(t, refuse), newHome(t, cfg)}
	var nodes []*meshNode
	for _, h := range homes {
		var boot []string
		for _, n := range nodes {
			boot = append(boot, n.mesh)
		}
		nodes = append(nodes, startMeshNode(t, h, boot...))
	}
	for i, n := range nodes {
		n.did = runID(t, homes[i]).DID
	}
	a, b, judge, counter := nodes[0], nodes[1], nodes[2], nodes[3]
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	// Service in both directions between every pair, a few windows.
	for w := range 3 {
		var ids []string
		for i, n := range nodes {
			ids = append(ids, publishAt(t, n, u, fmt.Sprintf("service %d %d", w, i)))
		}
		waitEverywhere(t, "events", nodes, ids)
	}
	// As long as the standing test waits: on a loaded machine the
	// windows' exchanges queue behind everything else.
	deadline := time.Now().Add(150 * time.Second)
	for k, home := range homes[2:] {
		for {
			view := standingAt(t, home)
			if view[a.did].Standing >= 0.001 && view[b.did].Standing >= 0.001 {
				t.Logf("standing at %s: a %.4f, b %.4f", home, view[a.did].Standing, view[b.did].Standing)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no standing for the labellers at %s: %+v\n%s", home, view, nodes[2+k].output())
			}
			time.Sleep(time.Second)
		}
	}

	spammer, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	// A fresh identity's label changes nothing at either.
	fresh, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	fsk, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	fl, err := label.New(fresh, fsk, label.Spam, label.Target{Kind: label.Author, Value: spammer.pubHex}, "", time.Now().Unix(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var fev event
	if err := json.Unmarshal(fl.AppendJSON(nil), &fev); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*meshNode{judge, counter} {
		if ok := publishMsg(t, n, &fev); !ok.Accepted {
			t.Fatalf("the fresh identity's label refused at %s: %s", n.url, ok.Message)
		}
		if ok := publishMsg(t, n, spam(t, spammer, "spam while only a stranger labels it")); !ok.Accepted {
			t.Fatalf("a label by a fresh identity made %s refuse: %s", n.url, ok.Message)
		}
	}
	if v := whyAt(t, homes[2], "--author", spammer.pubHex).Verdicts; len(v) != 1 || v[0].Sum != 0 || len(v[0].Labels) != 1 || v[0].Labels[0].Ignored == "" {
		t.Fatalf("why, after the fresh label: %+v", v[0])
	}

	// The spammer publishes at a; a and b, which have standing, label it.
	waitEverywhere(t, "the spammer's event", nodes, []string{publishAt(t, a, spammer, "spam at a")})
	var labelIDs []string
	for _, home := range homes[:2] {
		out, errOut, err := cli(t, "label", "--home", home, "--author", spammer.pubHex, "--reason", "spam", "--note", "floods")
		if err != nil {
			t.Fatalf("fleetmesh label: %v\n%s", err, errOut)
		}
		id := strings.TrimSpace(out)
		if !hexID.MatchString(id) {
			t.Fatalf("fleetmesh label printed %q, want the label's id", out)
		}
		labelIDs = append(labelIDs, id)
	}
	// A label about a node needs a dispute behind it: a's windows with b
	// all agreed, so there is none.
	if _, errOut, err := cli(t, "label", "--home", homes[0], "--node", b.did); err == nil || !strings.Contains(errOut, "disputed") {
		t.Fatalf("fleetmesh label --node with no dispute: %v\n%s", err, errOut)
	}
	// The judge refuses the spammer's next event within one gossip round.
	start := time.Now()
	var refused *event
	for refused == nil {
		ev := spam(t, spammer, fmt.Sprintf("spam %d", time.Now().UnixNano()))
		ok := publishMsg(t, judge, ev)
		switch {
		case !ok.Accepted && strings.HasPrefix(ok.Message, "blocked:"):
			if !strings.Contains(ok.Message, "labels.author") {
				t.Fatalf("the refusal does not name its rule: %q", ok.Message)
			}
			refused = ev
			t.Logf("refused %s after the labels: %q", time.Since(start).Round(time.Millisecond), ok.Message)
		case !ok.Accepted:
			t.Fatalf("refused for another reason: %q", ok.Message)
		case time.Since(start) > 60*time.Second:
			t.Fatalf("the judge still accepts the spammer 60 s after the labels\n%s", judge.output())
		default:
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The node with the default policy holds the labels and still takes
	// the spammer's events.
	waitEverywhere(t, "the labels", []*meshNode{counter}, labelIDs)
	if ok := publishMsg(t, counter, spam(t, spammer, "spam at the counting node")); !ok.Accepted {
		t.Fatalf("the node with the default policy refused: %q", ok.Message)
	}
	// Why: the two labellers, with standing, and the stranger, ignored.
	why := whyAt(t, homes[2], "--event", refused.ID)
	if !why.Refused || why.Author != spammer.pubHex || len(why.Verdicts) == 0 {
		t.Fatalf("why: %+v", why)
	}
	v := why.Verdicts[0]
	got := map[string]bool{}
	for _, l := range v.Labels {
		if l.Ignored == "" {
			got[l.Labeller] = true
		}
	}
	if !v.Passes() || !got[a.did] || !got[b.did] || len(got) != 2 {
		t.Fatalf("why names %v (sum %.4f), want %s and %s", got, v.Sum, a.did, b.did)
	}
	out, _, err := cli(t, "why", "--home", homes[2], "--event", refused.ID)
	if err != nil || !strings.Contains(out, a.did) || !strings.Contains(out, b.did) {
		t.Fatalf("fleetmesh why printed %q (%v)", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fams, err := metrics(ctx, judge.node)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := sample(fams, "fleetmesh_labels_refusals_total", "rule", "author"); !ok || n < 1 {
		t.Fatalf("fleetmesh_labels_refusals_total{rule=author} = %v (%v)", n, ok)
	}
	if n, ok := sample(fams, "fleetmesh_labels_held", "tier", "trusted"); !ok || n < 2 {
		t.Fatalf("fleetmesh_labels_held{tier=trusted} = %v (%v)", n, ok)
	}
	// A retraction by one labeller brings the sum back down.
	if _, errOut, err := cli(t, "label", "--home", homes[0], "--retract", labelIDs[0]); err != nil {
		t.Fatalf("fleetmesh label --retract: %v\n%s", err, errOut)
	}
	deadline = time.Now().Add(60 * time.Second)
	for whyAt(t, homes[2], "--author", spammer.pubHex).Verdicts[0].Sum >= v.Sum {
		if time.Now().After(deadline) {
			t.Fatal("the retraction did not reach the judge")
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestLabelFloodStaysBounded: one node process with [labels]
// max_per_labeller = 50 and max_labels = 100 takes a flood of labels
// from one fresh identity (the first 50 are stored, the rest answered
// `OK false` "blocked: labeller at its bound …"), then one label each
// from 150 fresh identities (each taken, the oldest label from a
// labeller without standing evicted to make room, and deleted from the
// store too). The node never holds more than 100 labels, by its metrics
// and by what its store serves.
func TestLabelFloodStaysBounded(t *testing.T) {
	cfg := "\n[relay]\nevents_per_second = 10000.0\nevents_burst = 10000\nip_events_per_second = 10000.0\nip_events_burst = 10000\n" +
		"\n[labels]\nmax_per_labeller = 50\nmax_labels = 100\n"
	home := newHome(t, cfg)
	n := startNode(t, home)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := dial(ctx, n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	victim, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	send := func(k *identity.Key, sk nostr.SecretKey, i int) okMessage {
		t.Helper()
		l, err := label.New(k, sk, label.Spam, label.Target{Kind: label.Author, Value: victim.pubHex}, fmt.Sprint("flood ", i), time.Now().Unix(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ev event
		if err := json.Unmarshal(l.AppendJSON(nil), &ev); err != nil {
			t.Fatal(err)
		}
		ok, err := publishOne(c, &ev)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	fresh := func() (*identity.Key, nostr.SecretKey) {
		k, err := identity.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		sk, err := nostr.GenerateSecretKey()
		if err != nil {
			t.Fatal(err)
		}
		return k, sk
	}
	k, sk := fresh()
	for i := range 80 {
		ok := send(k, sk, i)
		if i < 50 && !ok.Accepted || i >= 50 && (ok.Accepted || !strings.HasPrefix(ok.Message, "blocked: labeller at its bound")) {
			t.Fatalf("label %d from one labeller: %+v", i, ok)
		}
	}
	for i := range 150 {
		k, sk := fresh()
		if ok := send(k, sk, i); !ok.Accepted {
			t.Fatalf("label %d from a fresh labeller: %+v", i, ok)
		}
	}
	stored, err := storedEvents(c, "labels", map[string]any{"kinds": []int{label.Kind}, "limit": 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) > 100 {
		t.Fatalf("the store serves %d labels, bound 100", len(stored))
	}
	fams, err := metrics(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	held, _ := sample(fams, "fleetmesh_labels_held", "", "")
	evicted, _ := sample(fams, "fleetmesh_labels_received_total", "result", "evicted")
	if held != 100 || evicted != 100 {
		t.Fatalf("held %v labels (bound 100), evicted %v (want 100: 50 + 150 - 100)", held, evicted)
	}
}
