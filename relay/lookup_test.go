package relay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// meshOf backs r's Lookup hook with a fixed set of events, as peers that
// have not yet seen this node's writes would answer: every event matching
// the filter, whatever this node holds. It returns a function that counts
// the lookups made so far.
func meshOf(r *Relay, evs ...*nostr.Event) func() int {
	var mu sync.Mutex
	n := 0
	r.Lookup = func(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event)) {
		mu.Lock()
		n++
		mu.Unlock()
		for _, ev := range evs {
			if f.Matches(ev) && ctx.Err() == nil {
				fn(ev)
			}
		}
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// at signs an event of kind with tags at created_at ts.
func at(t *testing.T, k nostr.SecretKey, ts int64, kind int, tags nostr.Tags, content string) *nostr.Event {
	t.Helper()
	if tags == nil {
		tags = nostr.Tags{}
	}
	ev := &nostr.Event{CreatedAt: ts, Kind: kind, Tags: tags, Content: content}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestLookupKeepsNodeRules is the class of issue 30: what a REQ's lookup
// brings from peers that have not seen this node's latest writes passes
// the rules this node's own store applies (NIP-09 by id and by address,
// replaceable and addressable precedence, NIP-40, the RejectEvent
// policies, read permissions) before it is served, so a read right after
// the write that acknowledged it never shows what the write superseded.
// Each row publishes its writes at this node as a client would (OK true),
// gives the mesh stale copies, and reads at once.
func TestLookupKeepsNodeRules(t *testing.T) {
	k, _ := nostr.GenerateSecretKey()
	other, _ := nostr.GenerateSecretKey()
	pk := k.PubKey()
	pkHex := fmt.Sprintf("%x", pk)
	now := time.Now().Unix()
	note := at(t, k, now-100, 1, nil, "a note")
	profile1 := at(t, k, now-50, 0, nil, `{"name":"old"}`)
	profile2 := at(t, k, now-40, 0, nil, `{"name":"new"}`)
	article1 := at(t, k, now-50, 30023, nostr.Tags{{"d", "post"}}, "v1")
	article2 := at(t, k, now-40, 30023, nostr.Tags{{"d", "post"}}, "v2")
	otherArticle := at(t, k, now-50, 30023, nostr.Tags{{"d", "other"}}, "other d")
	delByID := at(t, k, now-10, 5, nostr.Tags{{"e", note.IDHex()}}, "")
	delByAddr := at(t, k, now-10, 5, nostr.Tags{{"a", "30023:" + pkHex + ":post"}}, "")
	laterArticle := at(t, k, now-5, 30023, nostr.Tags{{"d", "post"}}, "after the deletion")
	expired := at(t, k, now-30, 1, nostr.Tags{{"expiration", fmt.Sprint(now - 1)}}, "expired")
	banned := at(t, other, now-30, 1, nil, "from a banned author")
	dm := at(t, other, now-30, 4, nostr.Tags{{"p", fmt.Sprintf("%x", other.PubKey())}}, "private")
	authors := `{"authors":["` + pkHex + `"]}`
	ids := func(evs ...*nostr.Event) string {
		var q []string
		for _, ev := range evs {
			q = append(q, `"`+ev.IDHex()+`"`)
		}
		return `{"ids":[` + strings.Join(q, ",") + `]}`
	}
	for _, tc := range []struct {
		name    string
		mod     func(*Config)
		publish []*nostr.Event // at this node, each acknowledged OK true
		mesh    []*nostr.Event // what stale peers answer
		filter  string
		want    []*nostr.Event // the answer, newest first
	}{
		{name: "deleted by id, read by id", publish: []*nostr.Event{note, delByID}, mesh: []*nostr.Event{note},
			filter: ids(note), want: nil},
		{name: "deleted by id, read by author", publish: []*nostr.Event{note, delByID}, mesh: []*nostr.Event{note},
			filter: `{"kinds":[1],"authors":["` + pkHex + `"]}`, want: nil},
		{name: "deleted by id never held here", publish: []*nostr.Event{delByID}, mesh: []*nostr.Event{note},
			filter: ids(note), want: nil},
		{name: "replaceable keeps the newest", publish: []*nostr.Event{profile1, profile2}, mesh: []*nostr.Event{profile1},
			filter: `{"kinds":[0],"authors":["` + pkHex + `"]}`, want: []*nostr.Event{profile2}},
		{name: "replaceable: the older by id", publish: []*nostr.Event{profile2}, mesh: []*nostr.Event{profile1},
			filter: ids(profile1), want: nil},
		{name: "addressable keeps the newest per d", publish: []*nostr.Event{article1, article2, otherArticle}, mesh: []*nostr.Event{article1, otherArticle},
			filter: `{"kinds":[30023],"authors":["` + pkHex + `"]}`, want: []*nostr.Event{article2, otherArticle}},
		{name: "deleted by address up to its time", publish: []*nostr.Event{article1, delByAddr}, mesh: []*nostr.Event{article1, article2},
			filter: `{"kinds":[30023],"authors":["` + pkHex + `"]}`, want: nil},
		{name: "address deletion spares a later version", publish: []*nostr.Event{article1, delByAddr}, mesh: []*nostr.Event{article2, laterArticle},
			filter: `{"kinds":[30023],"authors":["` + pkHex + `"]}`, want: []*nostr.Event{laterArticle}},
		{name: "a newer version from the mesh replaces the held one", publish: []*nostr.Event{profile1}, mesh: []*nostr.Event{profile2},
			filter: `{"kinds":[0],"authors":["` + pkHex + `"]}`, want: []*nostr.Event{profile2}},
		{name: "a deletion from the mesh removes the held target", publish: []*nostr.Event{note}, mesh: []*nostr.Event{delByID},
			filter: authors, want: []*nostr.Event{delByID}},
		{name: "expired (NIP-40)", mesh: []*nostr.Event{expired, note},
			filter: authors, want: []*nostr.Event{note}},
		{name: "the node's policy", mesh: []*nostr.Event{banned},
			filter: `{"kinds":[1]}`, want: nil},
		{name: "read permission", mod: func(c *Config) { c.AuthRequiredKinds = []int{4} }, mesh: []*nostr.Event{dm},
			filter: `{"authors":["` + fmt.Sprintf("%x", other.PubKey()) + `"]}`, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestRelay(t, tc.mod)
			tr.r.RejectEvent = append(tr.r.RejectEvent, func(_ context.Context, ev *nostr.Event) string {
				if ev.PubKey == other.PubKey() && ev.Kind == 1 {
					return "blocked: this author is banned here"
				}
				return ""
			})
			meshOf(tr.r, tc.mesh...)
			c := tr.dial()
			for _, ev := range tc.publish {
				if ok, msg := c.publish(ev); !ok {
					t.Fatalf("publishing %s: %s", ev.Content, msg)
				}
			}
			got, closed := c.req("r", tc.filter)
			var want []string
			for _, ev := range tc.want {
				want = append(want, ev.IDHex())
			}
			if closed != "" || !slices.Equal(got, want) {
				t.Fatalf("REQ %s right after the writes:\n got %v (closed %q)\nwant %v", tc.filter, got, closed, want)
			}
			// What the lookup brought and the rules let pass is stored, as
			// a sync would store it: the next read finds it without the mesh.
			tr.r.Lookup = nil
			again, _ := c.req("again", tc.filter)
			if !slices.Equal(again, want) {
				t.Fatalf("REQ %s from the store alone: got %v, want %v", tc.filter, again, want)
			}
		})
	}
}

// TestLookupStoredLiveToOthers: an event a lookup stored reaches other
// connections' live subscriptions as any event from the mesh does, and
// not the subscription whose answer already has it.
func TestLookupStoredLiveToOthers(t *testing.T) {
	tr := newTestRelay(t, nil)
	k, _ := nostr.GenerateSecretKey()
	ev := signed(t, k, 1, nil, "held elsewhere")
	watcher := tr.dial()
	if got, _ := watcher.req("live", `{"kinds":[1]}`); len(got) != 0 {
		t.Fatalf("watcher's answer before any event: %v", got)
	}
	meshOf(tr.r, ev)
	c := tr.dial()
	if got, _ := c.req("r", `{"kinds":[1]}`); !slices.Equal(got, []string{ev.IDHex()}) {
		t.Fatalf("REQ answered from the mesh: %v", got)
	}
	if m := watcher.read(); m[0] != "EVENT" || m[1] != "live" || m[2].(map[string]any)["id"] != ev.IDHex() {
		t.Fatalf("the watcher was sent %v, want the lookup's event live", m)
	}
	// The requester's next event on its subscription is a new one, not
	// its lookup's again.
	marker := signed(t, k, 1, nil, "marker")
	if ok, msg := tr.dial().publish(marker); !ok {
		t.Fatal(msg)
	}
	if m := c.read(); m[0] != "EVENT" || m[1] != "r" || m[2].(map[string]any)["id"] != marker.IDHex() {
		t.Fatalf("the requester was sent %v, want the new event only", m)
	}
}
