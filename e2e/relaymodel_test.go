package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// relayModel is the reference model of one relay for the mesh's
// differential test (meshdiff_test.go): a map of every event some node
// acknowledged, and NIP-01 (replaceable and addressable precedence: the
// newest per key, on a tie the lowest id), NIP-09 (deletion by id and by
// "a" address up to the deletion's created_at, own events only, a
// deletion is never deleted) and NIP-40 (an event is not served once its
// expiration second has come) as plain functions over that map. It is
// written from the NIPs, not from the store, so that the store's reading
// of them is what the test checks.
//
// Every rule takes a "known" predicate: the same rules answer what one
// relay holding every acknowledged event would serve (known is always
// true) and what a node may still serve given only what it has seen.
type relayModel struct {
	events map[string]*modelEvent
	// byTarget lists the deletions naming an id in an "e" tag; byAddr the
	// deletions naming an address in an "a" tag and the versions of an
	// address.
	byTarget  map[string][]*modelEvent
	delByAddr map[string][]*modelEvent
	versions  map[string][]*modelEvent
	order     []*modelEvent
}

// modelEvent is an acknowledged event and where it was acknowledged.
type modelEvent struct {
	ev *event
	// exp is the NIP-40 expiration (0: none).
	exp int64
	// node is the index of the node that acknowledged it; seq is the
	// operation that wrote it.
	node, seq int
}

func newRelayModel() *relayModel {
	return &relayModel{
		events:    map[string]*modelEvent{},
		byTarget:  map[string][]*modelEvent{},
		delByAddr: map[string][]*modelEvent{},
		versions:  map[string][]*modelEvent{},
	}
}

// add records an event some node acknowledged with OK true.
func (m *relayModel) add(e *event, node, seq int) *modelEvent {
	if me, ok := m.events[e.ID]; ok {
		return me
	}
	me := &modelEvent{ev: e, node: node, seq: seq, exp: expirationOf(e)}
	m.events[e.ID] = me
	m.order = append(m.order, me)
	if e.Kind == 5 {
		for _, t := range e.Tags {
			if len(t) < 2 {
				continue
			}
			switch t[0] {
			case "e":
				m.byTarget[t[1]] = append(m.byTarget[t[1]], me)
			case "a":
				m.delByAddr[t[1]] = append(m.delByAddr[t[1]], me)
			}
		}
	}
	if a := addressOf(e); a != "" {
		m.versions[a] = append(m.versions[a], me)
	}
	return me
}

// expirationOf is an event's NIP-40 expiration tag, 0 if it has none.
func expirationOf(e *event) int64 {
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == "expiration" {
			if v, err := strconv.ParseInt(t[1], 10, 64); err == nil {
				return v
			}
		}
	}
	return 0
}

// isReplaceable and isAddressable are NIP-01's kind ranges.
func isReplaceable(k int) bool { return k == 0 || k == 3 || (k >= 10000 && k < 20000) }
func isAddressable(k int) bool { return k >= 30000 && k < 40000 }

// addressOf is the NIP-01 key of a replaceable ("kind:pubkey:") or
// addressable ("kind:pubkey:d") event, "" for any other.
func addressOf(e *event) string {
	switch {
	case isReplaceable(e.Kind):
		return fmt.Sprintf("%d:%s:", e.Kind, e.PubKey)
	case isAddressable(e.Kind):
		return fmt.Sprintf("%d:%s:%s", e.Kind, e.PubKey, tagValue(e, "d"))
	}
	return ""
}

// tagValue is the first value of an event's tag named name.
func tagValue(e *event, name string) string {
	for _, t := range e.Tags {
		if len(t) >= 2 && t[0] == name {
			return t[1]
		}
	}
	return ""
}

// beats says whether version a of an address takes precedence over b
// (NIP-01: the newer; on equal created_at, the lower id).
func beats(a, b *event) bool {
	return a.CreatedAt > b.CreatedAt || (a.CreatedAt == b.CreatedAt && a.ID < b.ID)
}

// killer is why an event is no longer served: an acknowledged event that
// deletes or supersedes it.
type killer struct {
	// rule is "deleted" (NIP-09 by id), "deleted-address" (NIP-09 by
	// "a") or "superseded" (NIP-01).
	rule string
	by   *modelEvent
}

// killedBy finds an event among those known that makes e dead: a
// deletion by its author naming it or its address (up to the deletion's
// created_at), or a version of its address that beats it.
func (m *relayModel) killedBy(e *modelEvent, known func(id string) bool) (killer, bool) {
	if e.ev.Kind == 5 {
		return killer{}, false
	}
	for _, d := range m.byTarget[e.ev.ID] {
		if d.ev.PubKey == e.ev.PubKey && known(d.ev.ID) {
			return killer{"deleted", d}, true
		}
	}
	a := addressOf(e.ev)
	if a == "" {
		return killer{}, false
	}
	for _, d := range m.delByAddr[a] {
		if d.ev.PubKey == e.ev.PubKey && d.ev.CreatedAt >= e.ev.CreatedAt && known(d.ev.ID) {
			return killer{"deleted-address", d}, true
		}
	}
	for _, v := range m.versions[a] {
		if v != e && beats(v.ev, e.ev) && known(v.ev.ID) {
			return killer{"superseded", v}, true
		}
	}
	return killer{}, false
}

// everything is the "known" of one relay that holds every acknowledged
// event.
func everything(string) bool { return true }

// expiredBy says whether a relay whose clock reads sec (Unix seconds)
// no longer serves e (NIP-40).
func (e *modelEvent) expiredBy(sec int64) bool { return e.exp != 0 && e.exp <= sec }

// modelFilter is a NIP-01 filter of the fields the generator uses.
type modelFilter struct {
	IDs     []string `json:"ids,omitempty"`
	Authors []string `json:"authors,omitempty"`
	Kinds   []int    `json:"kinds,omitempty"`
	T       []string `json:"#t,omitempty"`
	D       []string `json:"#d,omitempty"`
	Since   *int64   `json:"since,omitempty"`
	Until   *int64   `json:"until,omitempty"`
}

// matches is NIP-01 filter matching.
func (f *modelFilter) matches(e *event) bool {
	if len(f.IDs) > 0 && !slices.Contains(f.IDs, e.ID) {
		return false
	}
	if len(f.Authors) > 0 && !slices.Contains(f.Authors, e.PubKey) {
		return false
	}
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, e.Kind) {
		return false
	}
	if f.Since != nil && e.CreatedAt < *f.Since {
		return false
	}
	if f.Until != nil && e.CreatedAt > *f.Until {
		return false
	}
	for _, c := range []struct {
		name string
		want []string
	}{{"t", f.T}, {"d", f.D}} {
		if len(c.want) == 0 {
			continue
		}
		hit := false
		for _, t := range e.Tags {
			if len(t) >= 2 && t[0] == c.name && slices.Contains(c.want, t[1]) {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// String is the filter as JSON-ish text for failure messages.
func (f *modelFilter) String() string {
	var parts []string
	short := func(s []string) string {
		out := make([]string, len(s))
		for i, v := range s {
			out[i] = v[:min(8, len(v))]
		}
		return strings.Join(out, ",")
	}
	if len(f.IDs) > 0 {
		parts = append(parts, "ids:"+short(f.IDs))
	}
	if len(f.Authors) > 0 {
		parts = append(parts, "authors:"+short(f.Authors))
	}
	if len(f.Kinds) > 0 {
		parts = append(parts, fmt.Sprint("kinds:", f.Kinds))
	}
	if len(f.T) > 0 {
		parts = append(parts, "#t:"+strings.Join(f.T, ","))
	}
	if len(f.D) > 0 {
		parts = append(parts, "#d:"+strings.Join(f.D, ","))
	}
	if f.Since != nil {
		parts = append(parts, fmt.Sprint("since:", *f.Since))
	}
	if f.Until != nil {
		parts = append(parts, fmt.Sprint("until:", *f.Until))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// answer is what one relay holding every acknowledged event serves for f
// while its clock reads sec: live is what it must serve, maybe what it
// may serve or not (events whose expiration second falls inside the
// read, [lo, hi]).
func (m *relayModel) answer(f *modelFilter, lo, hi int64) (live, maybe map[string]*modelEvent) {
	live, maybe = map[string]*modelEvent{}, map[string]*modelEvent{}
	for _, e := range m.order {
		if !f.matches(e.ev) || e.expiredBy(lo) {
			continue
		}
		if _, dead := m.killedBy(e, everything); dead {
			continue
		}
		if e.expiredBy(hi) {
			maybe[e.ev.ID] = e
		} else {
			live[e.ev.ID] = e
		}
	}
	return live, maybe
}

// readCheck is one read to check against the model: what a node served
// for a filter, read between the clock seconds lo and hi.
type readCheck struct {
	f      *modelFilter
	got    []event
	lo, hi int64
	// seen says whether the answering node had seen an event before the
	// read: it acknowledged it, served it, or had converged past it.
	seen func(id string) bool
	// must says whether the node is bound to serve an event that is live
	// in the model: it acknowledged it, or had converged past it.
	must func(id string) bool
}

// violations lists how a read departs from one relay: an event served
// that no node acknowledged, that does not match, expired, or deleted or
// superseded by something the node had seen before the read; and, of the
// live events the node is bound to serve, those it left out. Each line
// starts with the check's name.
//
// Two things one relay may do too are not violations. An event served
// twice: a REQ registers its live subscription before it queries the
// store, so an event saved meanwhile may come both ways
// (relay/responding.go); a node saves events from the mesh while it
// answers. Two versions of one address, neither seen before the read:
// the older may be saved, and delivered live, while the REQ runs and the
// newer arrive after it; once the newer was seen before the read, the
// older is "superseded".
func (m *relayModel) violations(rc readCheck) []string {
	var out []string
	served := map[string]bool{}
	for i := range rc.got {
		e := &rc.got[i]
		me, ok := m.events[e.ID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("unknown: served %s (kind %d), which no node acknowledged", e.ID, e.Kind))
			continue
		case served[e.ID]:
			continue
		case !rc.f.matches(me.ev):
			out = append(out, fmt.Sprintf("mismatch: served %s (kind %d), which does not match the filter", e.ID, e.Kind))
		}
		served[e.ID] = true
		if me.expiredBy(rc.lo) {
			out = append(out, fmt.Sprintf("expired: served %s (kind %d) whose expiration %d had passed (clock %d)", e.ID, e.Kind, me.exp, rc.lo))
		}
		if k, dead := m.killedBy(me, rc.seen); dead {
			out = append(out, fmt.Sprintf("%s: served %s (kind %d, op %d at node %d) after seeing %s (kind %d, op %d at node %d)",
				k.rule, e.ID, e.Kind, me.seq, me.node, k.by.ev.ID, k.by.ev.Kind, k.by.seq, k.by.node))
		}
	}
	live, _ := m.answer(rc.f, rc.lo, rc.hi)
	for id, e := range live {
		if !served[id] && rc.must(id) {
			out = append(out, fmt.Sprintf("missing: left out %s (kind %d, op %d at node %d), live and known to the node", id, e.ev.Kind, e.seq, e.node))
		}
	}
	slices.Sort(out)
	return out
}

// TestRelayModel checks the reference model's rules on small histories,
// so that the differential test's verdicts rest on rules checked here
// against the NIPs' own examples.
func TestRelayModel(t *testing.T) {
	alice, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	bob, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	sign := func(u *user, at int64, kind int, tags ...[]string) *event {
		e, err := u.signAt(at, kind, "model", tags)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	note := sign(alice, 100, 1)
	expiring := sign(alice, 100, 1, []string{"expiration", "150"})
	p1, p2 := sign(alice, 100, 0), sign(alice, 200, 0)
	t1, t2 := sign(alice, 300, 0), sign(alice, 300, 0, []string{"t", "x"})
	tieWinner := t1
	if t2.ID < t1.ID {
		tieWinner = t2
	}
	a1, a2 := sign(alice, 100, 30023, []string{"d", "one"}), sign(alice, 100, 30023, []string{"d", "two"})
	a3 := sign(alice, 400, 30023, []string{"d", "one"})
	delNote := sign(alice, 500, 5, []string{"e", note.ID})
	delByBob := sign(bob, 500, 5, []string{"e", note.ID})
	delAddr := sign(alice, 300, 5, []string{"a", "30023:" + alice.pubHex + ":one"})
	delDel := sign(alice, 600, 5, []string{"e", delNote.ID})
	for _, c := range []struct {
		name   string
		events []*event
		now    int64
		want   []*event
	}{
		{"a note is served", []*event{note}, 0, []*event{note}},
		{"a replaceable keeps the newest", []*event{p2, p1}, 0, []*event{p2}},
		{"on a tie, the lowest id", []*event{t1, t2}, 0, []*event{tieWinner}},
		{"addressable: newest per d", []*event{a1, a2, a3}, 0, []*event{a2, a3}},
		{"deleted by its author", []*event{note, delNote}, 0, []*event{delNote}},
		{"deleted before it arrived", []*event{delNote, note}, 0, []*event{delNote}},
		{"another author's deletion does nothing", []*event{note, delByBob}, 0, []*event{note, delByBob}},
		{"another author's later deletion does not lift the author's", []*event{note, delNote, delByBob}, 0, []*event{delNote, delByBob}},
		{"a deletion is never deleted", []*event{note, delNote, delDel}, 0, []*event{delNote, delDel}},
		{"an address deletion covers versions up to its time", []*event{a1, delAddr}, 0, []*event{delAddr}},
		{"an address deletion spares later versions", []*event{a1, a3, delAddr}, 0, []*event{a3, delAddr}},
		{"served before its expiration", []*event{expiring}, 149, []*event{expiring}},
		{"not from its expiration second", []*event{expiring}, 150, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newRelayModel()
			for i, e := range c.events {
				m.add(e, 0, i)
			}
			live, _ := m.answer(&modelFilter{}, c.now, c.now)
			var got, want []string
			for id := range live {
				got = append(got, id)
			}
			for _, e := range c.want {
				want = append(want, e.ID)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("model serves %v, want %v", got, want)
			}
		})
	}

	// A node that has not seen the replacement may serve the old version;
	// one that has, may not; the live version served twice is no fault.
	m := newRelayModel()
	m.add(p1, 0, 0)
	m.add(p2, 1, 1)
	notSeen := readCheck{f: &modelFilter{}, got: []event{*p1}, seen: func(id string) bool { return id == p1.ID }, must: func(string) bool { return false }}
	if v := m.violations(notSeen); len(v) != 0 {
		t.Errorf("a stale version the node could not know was stale: %v", v)
	}
	seen := notSeen
	seen.seen = everything
	if v := m.violations(seen); len(v) != 1 || !strings.HasPrefix(v[0], "superseded:") {
		t.Errorf("a version served after its replacement was seen: %v, want one superseded", v)
	}
	twice := seen
	twice.got = []event{*p2, *p2}
	if v := m.violations(twice); len(v) != 0 {
		t.Errorf("the live version served twice (live and stored): %v, want no violation", v)
	}
	missing := readCheck{f: &modelFilter{}, seen: everything, must: func(id string) bool { return id == p2.ID }}
	if v := m.violations(missing); len(v) != 1 || !strings.HasPrefix(v[0], "missing:") {
		t.Errorf("a live event the node must serve, left out: %v, want one missing", v)
	}
}
