package label

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
)

type mapReader map[string]float64

func (m mapReader) Of(did string) float64 { return m[did] }

func testPolicy(t testing.TB, policy string, r mapReader, mod func(*Config, *Options)) *Policy {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Policy = policy
	opts := Options{Standing: r, Now: func() time.Time { return time.Unix(t0+100, 0) }}
	if mod != nil {
		mod(&cfg, &opts)
	}
	p, err := NewPolicy(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// note is a kind 1 event by sk.
func note(t testing.TB, sk nostr.SecretKey, text string, tags ...[]string) *nostr.Event {
	ev := &nostr.Event{CreatedAt: t0, Kind: 1, Content: text, Tags: tags}
	if err := sk.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// labelBy is node i's label (label key i) of reason on target.
func labelBy(t testing.TB, i int, reason Reason, target Target, dispute *receipt.Receipt) *nostr.Event {
	ev, err := New(nodeKey(t, i), nostrKey(t, 100+i), reason, target, "", t0, 0, dispute)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// publish takes ev in as the relay would: admitted, then stored.
func publish(t testing.TB, p *Policy, ev *nostr.Event) string {
	if msg := p.Admit(ev); msg != "" {
		return msg
	}
	p.Ingest(ev)
	return ""
}

// TestPolicy: one row per rule of spec/labels.md "Policy".
func TestPolicy(t *testing.T) {
	spammer := nostrKey(t, 50)
	sp := hexOf(spammer.PubKey())
	honest := mapReader{}
	for i := 1; i <= 3; i++ {
		honest[nodeKey(t, i).DID()] = 0.0004 // two pass the threshold, one does not
	}
	honest[nodeKey(t, 4).DID()] = 0.0001 // below min_standing
	for _, tc := range []struct {
		name      string
		policy    string
		labellers []int
		reason    Reason
		target    func(ev *nostr.Event) Target
		tags      [][]string
		mod       func(*Config, *Options)
		reports   []int // Nostr keys reporting the author
		want      string
	}{
		{name: "count never refuses", policy: ActionCount, labellers: []int{1, 2, 3}, want: ""},
		{name: "refuse past the threshold", policy: ActionRefuse, labellers: []int{1, 2}, want: "blocked: author labelled spam"},
		{name: "below the threshold", policy: ActionRefuse, labellers: []int{1}, want: ""},
		{name: "one labeller counts once", policy: ActionRefuse, labellers: []int{1, 1, 1}, want: ""},
		{name: "standing below min_standing counts nothing", policy: ActionRefuse, labellers: []int{1, 4}, want: ""},
		{name: "no standing at all", policy: ActionRefuse, labellers: []int{5, 6, 7, 8, 9}, want: ""},
		{name: "hold accepts", policy: ActionHold, labellers: []int{1, 2, 3}, want: ""},
		{name: "the event itself", policy: ActionRefuse, labellers: []int{1, 2},
			target: func(ev *nostr.Event) Target { return Target{Event, ev.IDHex()} }, want: "blocked: event labelled spam"},
		{name: "a blob it names", policy: ActionRefuse, labellers: []int{2, 3}, reason: Malware,
			tags:   [][]string{{"x", strings.Repeat("ef", 32)}},
			target: func(*nostr.Event) Target { return Target{Blob, strings.Repeat("ef", 32)} }, want: "blocked: blob labelled malware"},
		{name: "a listed reporter", policy: ActionRefuse, reports: []int{60},
			mod: func(c *Config, _ *Options) { c.Reporters = []string{hexOf(nostrKey(t, 60).PubKey())} }, want: "blocked: author labelled spam"},
		{name: "an unlisted reporter", policy: ActionRefuse, reports: []int{61, 62, 63, 64},
			mod: func(c *Config, _ *Options) { c.Reporters = []string{hexOf(nostrKey(t, 60).PubKey())} }, want: ""},
		{name: "this node's own label", policy: ActionRefuse, labellers: []int{9},
			mod: func(_ *Config, o *Options) { o.Self = nodeKey(t, 9).DID() }, want: "blocked: author labelled spam"},
		{name: "expired labels", policy: ActionRefuse, labellers: []int{1, 2},
			mod: func(_ *Config, o *Options) { o.Now = func() time.Time { return time.Unix(t0+10*86400, 0) } }, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPolicy(t, tc.policy, honest, tc.mod)
			ev := note(t, spammer, "buy now", tc.tags...)
			target := Target{Author, sp}
			if tc.target != nil {
				target = tc.target(ev)
			}
			reason := Spam
			if tc.reason != "" {
				reason = tc.reason
			}
			for _, i := range tc.labellers {
				lev, err := New(nodeKey(t, i), nostrKey(t, 100+i), reason, target, "", t0+int64(len(p.set.byID)), t0+86400, nil)
				if err != nil {
					t.Fatal(err)
				}
				if msg := publish(t, p, lev); msg != "" {
					t.Fatalf("label refused: %s", msg)
				}
			}
			for _, i := range tc.reports {
				rep := note(t, nostrKey(t, i), "spam", []string{"p", sp, "spam"})
				rep.Kind = KindReport
				nostrKey(t, i).Sign(rep)
				if msg := publish(t, p, rep); msg != "" {
					t.Fatalf("report refused: %s", msg)
				}
			}
			got := p.Admit(ev)
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("Admit: %q, want prefix %q", got, tc.want)
			}
			if got != "" {
				if !strings.Contains(got, "rule labels.") || !strings.Contains(got, ev.IDHex()) {
					t.Fatalf("the refusal does not name its rule and the event: %q", got)
				}
				if a, ok := p.Refused(ev.ID); !ok || a != spammer.PubKey() {
					t.Fatal("the refusal is not remembered for why")
				}
			}
			if tc.policy == ActionHold && len(tc.labellers) > 1 {
				if h := p.Held(); len(h) != 1 || h[0] != ev.ID {
					t.Fatalf("held %v", h)
				}
			}
		})
	}
}

// TestHoldQueues: under policy hold an event past the threshold is
// accepted and handed to the node's moderation queue with why; one below
// it is not.
func TestHoldQueues(t *testing.T) {
	spammer := nostrKey(t, 50)
	var held []*nostr.Event
	var whys []string
	p := testPolicy(t, ActionHold, mapReader{nodeKey(t, 1).DID(): 0.01}, func(_ *Config, o *Options) {
		o.Held = func(ev *nostr.Event, why string) {
			held = append(held, ev)
			whys = append(whys, why)
		}
	})
	other := note(t, nostrKey(t, 51), "fine")
	if p.Admit(other) != "" || len(held) != 0 {
		t.Fatalf("an unlabelled author's event held: %v", whys)
	}
	publish(t, p, labelBy(t, 1, Spam, Target{Author, hexOf(spammer.PubKey())}, nil))
	ev := note(t, spammer, "buy now")
	if msg := p.Admit(ev); msg != "" {
		t.Fatalf("held events are accepted, got %q", msg)
	}
	if len(held) != 1 || held[0].ID != ev.ID || !strings.HasPrefix(whys[0], "author labelled spam by 1 labeller(s)") {
		t.Fatalf("queued %d events, why %q", len(held), whys)
	}
}

// TestRetractionLifts: once a labeller retracts its label, the author is
// taken again.
func TestRetractionLifts(t *testing.T) {
	spammer := nostrKey(t, 50)
	p := testPolicy(t, ActionRefuse, mapReader{nodeKey(t, 1).DID(): 0.01}, nil)
	lev := labelBy(t, 1, Spam, Target{Author, hexOf(spammer.PubKey())}, nil)
	publish(t, p, lev)
	if p.Admit(note(t, spammer, "x")) == "" {
		t.Fatal("not refused with the label")
	}
	del, _ := Retract(nostrKey(t, 101), t0+1, lev.ID)
	publish(t, p, del)
	if msg := p.Admit(note(t, spammer, "y")); msg != "" {
		t.Fatalf("refused after retraction: %s", msg)
	}
}

// TestNodeLabels: ten thousand labels about a node from labellers with
// standing, with no dispute behind them (or one resolved, or one
// another node signed), change no policy and no standing; labels behind
// disputes the node never resolved do.
func TestNodeLabels(t *testing.T) {
	target := nodeKey(t, 999)
	const n = 10_000
	keys := make([]*identity.Key, 8)
	r := mapReader{target.DID(): 0.05}
	for i := range keys {
		keys[i] = nodeKey(t, 1+i)
		r[keys[i].DID()] = 0.002
	}
	resolvedWin := int64(-1)
	p := testPolicy(t, ActionRefuse, r, func(c *Config, o *Options) {
		c.MaxPerLabeller = n
		o.Resolved = func(d *receipt.Receipt) bool { return d.WindowStart == resolvedWin }
	})
	sk := nostrKey(t, 7)
	// No dispute: refused before it is stored, for the missing dispute,
	// before any signature is read (TestParseRefuses refuses one signed
	// properly), so the flood's signatures are one signature copied.
	sig := b64(keys[0].Sign([]byte("x")))
	pub, tdid := sk.PubKey(), target.DID()
	dids := make([]string, len(keys))
	for i, k := range keys {
		dids[i] = k.DID()
	}
	refused := 0
	for i := range n {
		ev := &nostr.Event{CreatedAt: t0 + int64(i), Kind: Kind, PubKey: pub, Content: fmt.Sprint(i),
			Tags: nostr.Tags{{"L", Namespace}, {"l", string(Misbehaving), Namespace}, {"r", tdid}, {"did", dids[i%len(dids)], sig}}}
		// The relay checks the Nostr signature before Admit; an id is
		// all the policy reads of it.
		ev.ID = ev.ComputeID()
		if msg := publish(t, p, ev); strings.HasPrefix(msg, "invalid: ") {
			refused++
		}
	}
	if refused != n {
		t.Fatalf("%d of %d labels without a dispute refused", refused, n)
	}
	if all, _ := p.set.Len(); all != 0 {
		t.Fatalf("%d labels without a dispute stored", all)
	}
	if v := p.NodeVerdict(target.DID()); v != nil || p.Standing(target.DID(), 0.05) != 0.05 {
		t.Fatalf("labels without a dispute changed the verdict (%v) or standing (%v)", v, p.Standing(target.DID(), 0.05))
	}
	// Disputes the node resolved (a co-signed receipt of the window is
	// held here): stored, weigh nothing.
	d := disputed(t, keys[0], target)
	resolvedWin = d.WindowStart
	for i := range keys {
		if msg := publish(t, p, labelBy(t, 1+i, Misbehaving, Target{Node, target.DID()}, disputed(t, keys[i], target))); msg != "" {
			t.Fatal(msg)
		}
	}
	if v := p.NodeVerdict(target.DID()); v != nil || p.Standing(target.DID(), 0.05) != 0.05 {
		t.Fatal("labels behind resolved disputes changed the verdict or standing")
	}
	// Unresolved: they count.
	resolvedWin = -1
	v := p.NodeVerdict(target.DID())
	if v == nil || v.Sum < p.cfg.Threshold {
		t.Fatalf("labels behind unresolved disputes: verdict %+v", v)
	}
	if p.Standing(target.DID(), 0.05) != 0 {
		t.Fatal("a node past the threshold keeps its standing under refuse")
	}
	// Under count, it is counted and nothing else.
	pc := testPolicy(t, ActionCount, r, nil)
	for i := range keys {
		publish(t, pc, labelBy(t, 1+i, Misbehaving, Target{Node, target.DID()}, disputed(t, keys[i], target)))
	}
	if pc.NodeVerdict(target.DID()) == nil || pc.Standing(target.DID(), 0.05) != 0.05 {
		t.Fatal("under count: not counted, or standing changed")
	}
}

// TestLabelStorageRefused: a label that finds no room is refused before
// it is stored, with blocked:.
func TestLabelStorageRefused(t *testing.T) {
	p := testPolicy(t, ActionCount, mapReader{}, func(c *Config, _ *Options) { c.MaxPerLabeller = 3 })
	for i := range 5 {
		ev, err := New(nodeKey(t, 1), nostrKey(t, 101), Spam, Target{Author, fmt.Sprintf("%064x", i)}, "", t0, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		msg := publish(t, p, ev)
		if (i < 3) != (msg == "") || i >= 3 && !strings.HasPrefix(msg, "blocked: labeller at its bound") {
			t.Fatalf("label %d: %q", i, msg)
		}
	}
}
