package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/gorilla/websocket"
)

// The Go side of the end-to-end tests signs Nostr events itself with btcec
// (BIP-340 Schnorr) rather than with the project's nostr package, so that a
// bug there cannot hide from these tests.

// event is a NIP-01 event as it travels.
type event struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

// user is a Nostr key pair.
type user struct {
	priv   *btcec.PrivateKey
	pubHex string
}

func newUser() (*user, error) {
	priv, err := btcec.NewPrivateKey()
	if err != nil {
		return nil, err
	}
	return &user{priv: priv, pubHex: hex.EncodeToString(schnorr.SerializePubKey(priv.PubKey()))}, nil
}

// sign makes a signed event. Content is restricted to characters that need
// no JSON escaping, so encoding/json's output is NIP-01's canonical form.
func (u *user) sign(kind int, content string, tags [][]string) (*event, error) {
	return u.signAt(time.Now().Unix(), kind, content, tags)
}

// signAt is sign with a chosen created_at.
func (u *user) signAt(createdAt int64, kind int, content string, tags [][]string) (*event, error) {
	for _, r := range content {
		if r < 0x20 || r == '"' || r == '\\' || r > 0x7e {
			return nil, fmt.Errorf("content %q needs escaping; keep test content plain ASCII", content)
		}
	}
	if tags == nil {
		tags = [][]string{}
	}
	e := &event{PubKey: u.pubHex, CreatedAt: createdAt, Kind: kind, Tags: tags, Content: content}
	ser, err := json.Marshal([]any{0, e.PubKey, e.CreatedAt, e.Kind, e.Tags, e.Content})
	if err != nil {
		return nil, err
	}
	id := sha256.Sum256(ser)
	sig, err := schnorr.Sign(u.priv, id[:])
	if err != nil {
		return nil, err
	}
	e.ID = hex.EncodeToString(id[:])
	e.Sig = hex.EncodeToString(sig.Serialize())
	return e, nil
}

// randomContent returns plain ASCII content unique to this call.
func randomContent(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + " " + hex.EncodeToString(b)
}

// dial opens a WebSocket to the relay.
func dial(ctx context.Context, url string) (*websocket.Conn, error) {
	c, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	return c, nil
}

// fetchIDs asks the relay for events by id (in chunks of at most chunk ids
// per REQ) and returns the set it served. It checks the served events carry
// the ids asked for.
func fetchIDs(ctx context.Context, url string, ids []string, chunk int) (map[string]bool, error) {
	c, err := dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	found := make(map[string]bool, len(ids))
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		events, err := storedEvents(c, fmt.Sprintf("ids-%d", start), map[string]any{"ids": part, "limit": len(part)})
		if err != nil {
			return nil, err
		}
		asked := make(map[string]bool, len(part))
		for _, id := range part {
			asked[id] = true
		}
		for _, e := range events {
			if !asked[e.ID] {
				return nil, fmt.Errorf("REQ for ids served an event not asked for: %s", e.ID)
			}
			found[e.ID] = true
		}
	}
	return found, nil
}

// query runs one REQ on a new connection and returns the stored events.
func query(ctx context.Context, url string, filter map[string]any) ([]event, error) {
	c, err := dial(ctx, url)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	return storedEvents(c, "q", filter)
}

// storedEvents sends a REQ on c, collects its events up to EOSE and closes
// the subscription.
func storedEvents(c *websocket.Conn, subID string, filter map[string]any) ([]event, error) {
	req, _ := json.Marshal([]any{"REQ", subID, filter})
	if err := c.WriteMessage(websocket.TextMessage, req); err != nil {
		return nil, err
	}
	var out []event
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return nil, fmt.Errorf("reading REQ %s: %w", subID, err)
		}
		var msg []json.RawMessage
		if err := json.Unmarshal(data, &msg); err != nil || len(msg) < 2 {
			return nil, fmt.Errorf("relay sent %q", data)
		}
		var typ, sub string
		json.Unmarshal(msg[0], &typ)
		json.Unmarshal(msg[1], &sub)
		if sub != subID {
			continue
		}
		switch typ {
		case "EVENT":
			var e event
			if len(msg) < 3 || json.Unmarshal(msg[2], &e) != nil {
				return nil, fmt.Errorf("bad EVENT %q", data)
			}
			out = append(out, e)
		case "EOSE":
			closeMsg := fmt.Sprintf(`["CLOSE",%q]`, subID)
			return out, c.WriteMessage(websocket.TextMessage, []byte(closeMsg))
		case "CLOSED":
			return nil, fmt.Errorf("REQ %s closed: %s", subID, data)
		}
	}
}

// publishOne sends one event on c and waits for its OK.
func publishOne(c *websocket.Conn, e *event) (okMessage, error) {
	msg, _ := json.Marshal([]any{"EVENT", e})
	if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
		return okMessage{}, err
	}
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return okMessage{}, fmt.Errorf("waiting for OK of %s: %w", e.ID, err)
		}
		if m, ok := parseOK(data); ok && m.ID == e.ID {
			return m, nil
		}
	}
}

// okMessage is a parsed ["OK", id, accepted, message].
type okMessage struct {
	ID       string
	Accepted bool
	Message  string
}

// parseOK parses an OK message; ok is false for any other message.
func parseOK(data []byte) (m okMessage, ok bool) {
	var msg []json.RawMessage
	if json.Unmarshal(data, &msg) != nil || len(msg) != 4 || strings.TrimSpace(string(msg[0])) != `"OK"` {
		return m, false
	}
	if json.Unmarshal(msg[1], &m.ID) != nil || json.Unmarshal(msg[2], &m.Accepted) != nil || json.Unmarshal(msg[3], &m.Message) != nil {
		return m, false
	}
	return m, true
}
