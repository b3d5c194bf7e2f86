// Command gen publishes a fixed mix of events to a running relay and then
// writes, one JSON event per line, every event the relay serves for them:
// how store/testdata/prev-release was filled (see its make.sh and README).
// Keys and timestamps are derived from fixed seeds, so a run against the
// same build writes the same events.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"fleetmesh.org/fleetmesh/nostr"
)

// base is the created_at every event is placed from: fixed, so the set is
// the same on every run, and recent enough that no relay refuses it as too
// old.
const base = 1_790_000_000

func main() {
	url := flag.String("url", "", "the relay's ws:// URL")
	out := flag.String("out", "events.jsonl", "where to write the events the relay serves")
	flag.Parse()
	if *url == "" {
		log.Fatal("gen: -url is required")
	}
	c, _, err := websocket.DefaultDialer.Dial(*url, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	keys := make([]nostr.SecretKey, 3)
	for i := range keys {
		seed := sha256.Sum256([]byte(fmt.Sprintf("fleetmesh prev-release fixture author %d", i)))
		k, err := nostr.SecretKeyFromBytes(seed[:])
		if err != nil {
			log.Fatal(err)
		}
		keys[i] = k
	}
	pub := func(i int) string { p := keys[i].PubKey(); return hex.EncodeToString(p[:]) }
	publish := func(author int, createdAt int64, kind int, tags nostr.Tags, content string) *nostr.Event {
		ev := &nostr.Event{CreatedAt: createdAt, Kind: kind, Tags: tags, Content: content}
		if err := keys[author].Sign(ev); err != nil {
			log.Fatal(err)
		}
		msg := nostr.ClientMessage{Type: nostr.MsgEvent, Event: ev}
		if err := c.WriteMessage(websocket.TextMessage, msg.AppendJSON(nil)); err != nil {
			log.Fatal(err)
		}
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				log.Fatal(err)
			}
			m, err := nostr.ParseRelayMessage(data)
			if err != nil || m.Type != nostr.MsgOK || m.EventID != ev.ID {
				continue
			}
			if !m.OK {
				log.Fatalf("gen: the relay refused kind %d %q: %s", kind, content, m.Text)
			}
			return ev
		}
	}

	var notes []*nostr.Event
	for i := range 20 {
		tags := nostr.Tags{{"t", "fixture"}}
		if i%4 == 1 {
			tags = append(tags, []string{"p", pub((i + 1) % 3)})
		}
		notes = append(notes, publish(i%3, base+int64(i)*60, 1, tags, fmt.Sprintf("note %d", i)))
	}
	publish(0, base+10, 0, nil, `{"name":"first"}`)
	publish(0, base+20, 0, nil, `{"name":"second"}`) // replaces the first
	publish(1, base+30, 3, nostr.Tags{{"p", pub(0)}, {"p", pub(2)}}, "")
	publish(1, base+40, 10002, nostr.Tags{{"r", "wss://relay.example.org"}}, "")
	publish(2, base+50, 7, nostr.Tags{{"e", notes[0].IDHex()}, {"p", pub(0)}}, "+")
	publish(2, base+60, 30023, nostr.Tags{{"d", "post"}, {"title", "one"}}, "first draft")
	publish(2, base+70, 30023, nostr.Tags{{"d", "post"}, {"title", "one"}}, "second draft") // replaces it
	publish(2, base+80, 30023, nostr.Tags{{"d", "other"}}, "another article")
	publish(0, base+90, 1, nostr.Tags{{"expiration", fmt.Sprint(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix())}}, "expires in 2100")
	doomed := publish(1, base+100, 1, nil, "to be deleted")
	publish(1, base+110, 5, nostr.Tags{{"e", doomed.IDHex()}}, "")

	// What the relay serves now is what the fixture must serve after an
	// upgrade.
	req := nostr.ClientMessage{Type: nostr.MsgReq, SubID: "all", Filters: []nostr.Filter{{Limit: 500, HasLimit: true}}}
	if err := c.WriteMessage(websocket.TextMessage, req.AppendJSON(nil)); err != nil {
		log.Fatal(err)
	}
	var served []*nostr.Event
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			log.Fatal(err)
		}
		m, err := nostr.ParseRelayMessage(data)
		if err != nil || m.SubID != "all" {
			continue
		}
		if m.Type == nostr.MsgEOSE {
			break
		}
		if m.Type == nostr.MsgEvent {
			served = append(served, m.Event)
		}
	}
	slices.SortFunc(served, func(a, b *nostr.Event) int { return strings.Compare(a.IDHex(), b.IDHex()) })
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	for _, e := range served {
		b, err := json.Marshal(e)
		if err != nil {
			log.Fatal(err)
		}
		f.Write(append(b, '\n'))
	}
	log.Printf("gen: published; the relay serves %d events; written to %s", len(served), *out)
}
