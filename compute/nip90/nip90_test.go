package nip90

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// published collects what the bridge publishes.
type published struct {
	mu  sync.Mutex
	evs []*nostr.Event
	got chan struct{}
}

func (p *published) publish(_ context.Context, ev *nostr.Event) error {
	p.mu.Lock()
	p.evs = append(p.evs, ev)
	p.mu.Unlock()
	p.got <- struct{}{}
	return nil
}

func (p *published) wait(t *testing.T, n int) []*nostr.Event {
	t.Helper()
	for range n {
		select {
		case <-p.got:
		case <-time.After(30 * time.Second):
			t.Fatalf("the bridge published fewer than %d events", n)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*nostr.Event(nil), p.evs...)
}

func request(t *testing.T, kind int, content string, tags nostr.Tags) *nostr.Event {
	k, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	ev := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: kind, Content: content, Tags: tags}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func status(ev *nostr.Event) string {
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "status" {
			return t[1]
		}
	}
	return ""
}

// noPayment fails if an event carries any payment field.
func noPayment(t *testing.T, ev *nostr.Event) {
	t.Helper()
	for _, tg := range ev.Tags {
		if len(tg) > 0 && (tg[0] == "amount" || tg[0] == "bid" || tg[0] == "request" || strings.Contains(strings.Join(tg, " "), "payment-required") || strings.HasPrefix(strings.Join(tg[1:], ""), "lnbc")) {
			t.Fatalf("kind %d carries a payment field %v", ev.Kind, tg)
		}
	}
}

func TestPoW(t *testing.T) {
	key, _ := nostr.GenerateSecretKey()
	p := &published{got: make(chan struct{}, 16)}
	b := New(key, Hooks{Publish: p.publish}, nil)
	defer b.Close()
	tmpl := `{"kind":1,"content":"do work!","created_at":1735252123,"tags":[]}`
	req := request(t, KindPoW, "", nostr.Tags{{"i", tmpl, "text"}, {"param", "pow", "12"}, {"bid", "1000"}})
	b.Stored(req, true)
	evs := p.wait(t, 3)
	if evs[0].Kind != KindFeedback || status(evs[0]) != "processing" || evs[1].Kind != KindPoW+1000 || status(evs[2]) != "success" {
		t.Fatalf("published %d %q, %d, %d %q", evs[0].Kind, status(evs[0]), evs[1].Kind, evs[2].Kind, status(evs[2]))
	}
	for _, ev := range evs {
		noPayment(t, ev)
	}
	// The mined event is unsigned: give it a placeholder signature to
	// decode it, then check its id.
	var raw map[string]any
	if err := json.Unmarshal([]byte(evs[1].Content), &raw); err != nil {
		t.Fatalf("result %q: %v", evs[1].Content, err)
	}
	raw["sig"] = strings.Repeat("00", 64)
	j, _ := json.Marshal(raw)
	var mined nostr.Event
	if err := json.Unmarshal(j, &mined); err != nil {
		t.Fatalf("result %q: %v", evs[1].Content, err)
	}
	if !mined.CheckID() || leadingZeros(mined.ID) < 12 || mined.PubKey != req.PubKey || mined.Content != "do work!" {
		t.Fatalf("mined %+v", mined)
	}
}

func TestRefusals(t *testing.T) {
	key, _ := nostr.GenerateSecretKey()
	p := &published{got: make(chan struct{}, 16)}
	b := New(key, Hooks{Publish: p.publish}, nil)
	defer b.Close()
	for _, tc := range []struct {
		name string
		req  *nostr.Event
		want string
	}{
		{"too much pow", request(t, KindPoW, "", nostr.Tags{{"i", "{}", "text"}, {"param", "pow", "40"}}), `param "pow"`},
		{"encrypted", request(t, KindPoW, "x", nostr.Tags{{"encrypted"}}), "encrypted"},
		{"group", request(t, KindCount, `[{"kinds":[1]}]`, nostr.Tags{{"param", "group", "content"}}), "group"},
		{"no module", request(t, KindWasm, "", nil), "no module"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.Stored(tc.req, true)
			// A processing feedback comes first for the requests that
			// parse; the error follows.
			for {
				evs := p.wait(t, 1)
				last := evs[len(evs)-1]
				if status(last) == "processing" {
					continue
				}
				if status(last) != "error" || !strings.Contains(strings.Join(last.Tags[0], " "), tc.want) || len(last.Tags[0]) < 3 {
					t.Fatalf("feedback %v, want an error naming %q", last.Tags, tc.want)
				}
				break
			}
		})
	}
	// Addressed to another bridge, or stored from the mesh: not taken.
	b.Stored(request(t, KindPoW, "", nostr.Tags{{"p", strings.Repeat("ab", 32)}}), true)
	b.Stored(request(t, KindPoW, "", nil), false)
	select {
	case <-p.got:
		t.Fatal("the bridge answered a request not for it")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestCount(t *testing.T) {
	key, _ := nostr.GenerateSecretKey()
	p := &published{got: make(chan struct{}, 16)}
	b := New(key, Hooks{Publish: p.publish, Count: func(_ context.Context, f *nostr.Filter) (int64, error) {
		return int64(len(f.Kinds)), nil
	}}, nil)
	defer b.Close()
	b.Stored(request(t, KindCount, `[{"kinds":[1,7]},{"kinds":[3]}]`, nil), true)
	evs := p.wait(t, 3)
	if evs[1].Kind != KindCount+1000 || evs[1].Content != "3" {
		t.Fatalf("count result %d %q, want 3", evs[1].Kind, evs[1].Content)
	}
}

// FuzzParse feeds the request decoder arbitrary tags and content.
func FuzzParse(f *testing.F) {
	f.Add(KindPoW, "", `[["i","{}","text"],["param","pow","8"],["bid","10"]]`)
	f.Add(KindCount, `[{"kinds":[1]}]`, `[]`)
	f.Add(KindWasm, "", `[["i","AGFzbQ==","text","","module"],["param","module","bafk"]]`)
	f.Add(KindPoW, "", `[["i"],["param"],[]]`)
	f.Fuzz(func(t *testing.T, kind int, content, tags string) {
		var ts nostr.Tags
		if json.Unmarshal([]byte(tags), &ts) != nil {
			return
		}
		r, err := Parse(&nostr.Event{Kind: kind, Content: content, Tags: ts})
		if err == nil && r.Params == nil {
			t.Fatal("parsed with no params map")
		}
	})
}
