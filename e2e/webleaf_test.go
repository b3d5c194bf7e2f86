package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/leaf"
)

// jsLeaf is the browser leaf's modules (web/src/leaf) run under Node by
// web/test/leafdriver.mjs, one process per open of the app, its state
// kept in dir between them as a page's IndexedDB is.
type jsLeaf struct {
	dir  string
	seed []byte
	// sent is every HTTP request the leaf made, in every run.
	sent []jsRequest
}

type jsRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func newJSLeaf(t *testing.T) *jsLeaf {
	t.Helper()
	needBinary(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the browser leaf's end-to-end tests need Node 20 (apt-get install nodejs npm)")
	}
	if _, err := os.Stat(filepath.Join(moduleRoot, "web", "node_modules", "@noble", "curves")); err != nil {
		t.Fatalf("web/node_modules is missing: run `cd web && npm ci` (scripts/test.sh does)")
	}
	l := &jsLeaf{dir: t.TempDir(), seed: make([]byte, 32)}
	if _, err := rand.Read(l.seed); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, "seed"), l.seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// run opens the leaf, runs the commands and closes it; it returns each
// command's result.
func (l *jsLeaf) run(t *testing.T, commands ...map[string]any) []json.RawMessage {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"dir": l.dir, "window_secs": int(webLeafWindow / time.Second), "commands": commands})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(moduleRoot, "web", "test", "leafdriver.mjs"))
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("browser leaf: %v\n%s", err, stderr.String())
	}
	var out struct {
		Results []json.RawMessage `json:"results"`
		Sent    []jsRequest       `json:"sent"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("browser leaf printed %q: %v", stdout.String(), err)
	}
	l.sent = append(l.sent, out.Sent...)
	for i, r := range out.Results {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(r, &e) == nil && e.Error != "" {
			t.Fatalf("browser leaf: %v: %s", commands[i], r)
		}
	}
	return out.Results
}

type jsSummary struct {
	PickedUp     int    `json:"picked_up"`
	OutboxSent   int    `json:"outbox_sent"`
	OutboxLeft   int    `json:"outbox_left"`
	Receipts     int    `json:"receipts"`
	ReceiptsLeft int    `json:"receipts_left"`
	CaughtUp     bool   `json:"caught_up"`
	Error        string `json:"error"`
}

func summaryOf(t *testing.T, raw json.RawMessage) jsSummary {
	t.Helper()
	var s jsSummary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("wake summary %s: %v", raw, err)
	}
	if s.Error != "" {
		t.Fatalf("browser leaf wake: %s", raw)
	}
	return s
}

type jsMessage struct {
	Seq           int    `json:"seq"`
	From          string `json:"from"`
	Authenticated bool   `json:"authenticated"`
	Error         string `json:"error"`
	Message       struct {
		Type string `json:"type"`
		Body struct {
			Content string `json:"content"`
		} `json:"body"`
	} `json:"message"`
}

const basicMessage = "https://didcomm.org/basicmessage/2.0/message"

// webLeafWindow is the home's accounting window in the browser leaf's
// test: long enough that one open of the leaf (a Node process, about a
// second) falls inside one window when it starts just after a window
// starts, so both sides count its pickup in the same window.
const webLeafWindow = 4 * time.Second

var webLeafConfig = "\n[mesh]\nsync_interval = \"1h\"\nmaintain_interval = \"1s\"\n" +
	"\n[accounting]\nwindow = '4s'\ndispute_period = '8s'\n"

// alignToWindow waits until just after the next window starts.
func alignToWindow() {
	next := time.Now().Truncate(webLeafWindow).Add(webLeafWindow + 150*time.Millisecond)
	time.Sleep(time.Until(next))
}

// TestWebLeafWithHome: the browser leaf's modules, under Node, against a
// `fleetmesh run` home with 4-second accounting windows. It pairs with
// the node that served it (GET /didcomm) and again by the node's join
// code, and is mediated; a message sent to its DID while it is closed is
// picked up at its next open; it and a Go leaf (package leaf, in this
// process) exchange a message both ways through the same home; after two
// window closes its receipts with the home are co-signed, and `fleetmesh
// receipts --verify` verifies its chain at the home, with the pickups
// counted alike on both sides. Nothing it sent in any run carries its
// key material, in any encoding.
func TestWebLeafWithHome(t *testing.T) {
	home := newHome(t, webLeafConfig)
	n, err := tryStartNode(t, home, "127.0.0.1:0", "--mesh-listen", "/ip4/127.0.0.1/tcp/0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the home's output:\n%s", n.output())
		}
	})
	homeDID := runID(t, home).DID
	endpoint := n.httpURL() + "/didcomm"
	js := newJSLeaf(t)

	out, errOut, err := cli(t, "invite", "--home", home, "--json", "--endpoint", endpoint)
	if err != nil {
		t.Fatalf("fleetmesh invite: %v\n%s", err, errOut)
	}
	var code struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal([]byte(out), &code); err != nil || code.Code == "" {
		t.Fatalf("invite --json printed %q: %v", out, err)
	}

	// First open: pair with the serving node, then by the join code (the
	// same node: only its endpoint is updated), and get mediated.
	res := js.run(t, map[string]any{"op": "did"}, map[string]any{"op": "pairWithNode", "url": n.httpURL()},
		map[string]any{"op": "pair", "invitation": "fleetmesh:" + code.Code}, map[string]any{"op": "wake"}, map[string]any{"op": "homes"})
	var id struct {
		DID string `json:"did"`
	}
	var paired [2]struct {
		DID      string `json:"did"`
		Endpoint string `json:"endpoint"`
	}
	json.Unmarshal(res[0], &id)
	json.Unmarshal(res[1], &paired[0])
	json.Unmarshal(res[2], &paired[1])
	key, err := identity.KeyFromSeed(js.seed)
	if err != nil {
		t.Fatal(err)
	}
	if id.DID != key.DID() {
		t.Fatalf("browser leaf DID %s, Go makes %s of the same seed", id.DID, key.DID())
	}
	for i, p := range paired {
		if p.DID != homeDID || p.Endpoint != endpoint {
			t.Fatalf("pairing %d gave %+v, want %s at %s", i, p, homeDID, endpoint)
		}
	}
	summaryOf(t, res[3])
	var homes []struct {
		DID      string `json:"did"`
		Mediated bool   `json:"mediated"`
	}
	if json.Unmarshal(res[4], &homes) != nil || len(homes) != 1 || !homes[0].Mediated {
		t.Fatalf("homes after the first wake: %s", res[4])
	}

	// While it is closed, a node sends it a message through the home.
	sender := newHome(t, "")
	senderDID := runID(t, sender).DID
	cmd := exec.Command(binary, "didcomm", "send", "--home", sender, "--to", id.DID, "--via", endpoint)
	cmd.Stdin = strings.NewReader(`{"type":"` + basicMessage + `","body":{"content":"sent while closed"}}`)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("didcomm send: %v\n%s", err, o)
	}

	// A Go leaf with the same home.
	oob, errOut, err := cli(t, "didcomm", "invite", "--home", home, "--endpoint", endpoint)
	if err != nil {
		t.Fatalf("didcomm invite: %v\n%s", err, errOut)
	}
	cfg := leaf.NewConfig(t.TempDir())
	cfg.WindowSecs, cfg.BudgetMs = int64(webLeafWindow/time.Second), 15_000
	gl, err := leaf.New(cfg, leaf.NewFileKeyStore(filepath.Join(t.TempDir(), "leaf.key")))
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	if err := gl.Pair(strings.TrimSpace(oob)); err != nil {
		t.Fatal(err)
	}
	goWake := func() *leaf.Summary {
		t.Helper()
		s, err := gl.Sync(nil)
		if err != nil || s.Error != "" {
			t.Fatalf("Go leaf wake: %v %s", err, s.JSON())
		}
		return s
	}
	goWake()

	// Second open: the message sent while closed is picked up; the
	// browser leaf writes to the Go leaf, forwarded through the home.
	alignToWindow()
	res = js.run(t, map[string]any{"op": "wake"}, map[string]any{"op": "messages"},
		map[string]any{"op": "send", "to": gl.DID(), "message": map[string]any{"type": basicMessage, "body": map[string]string{"content": "from the browser leaf"}}},
		map[string]any{"op": "wake"})
	if s := summaryOf(t, res[0]); s.PickedUp != 1 {
		t.Fatalf("the wake after the send picked up %d messages, want 1", s.PickedUp)
	}
	var msgs []jsMessage
	if json.Unmarshal(res[1], &msgs) != nil || len(msgs) != 1 || msgs[0].Message.Body.Content != "sent while closed" || msgs[0].From != senderDID || !msgs[0].Authenticated {
		t.Fatalf("messages after the pickup: %s", res[1])
	}
	if s := summaryOf(t, res[3]); s.OutboxSent != 1 || s.OutboxLeft != 0 {
		t.Fatalf("the wake after sendMessage sent %d, left %d", s.OutboxSent, s.OutboxLeft)
	}

	// The Go leaf picks it up and answers.
	if s := goWake(); s.PickedUp != 1 {
		t.Fatalf("the Go leaf picked up %d messages, want the browser leaf's 1", s.PickedUp)
	}
	raw, err := gl.Messages(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var goMsgs []struct {
		From          string          `json:"from"`
		Authenticated bool            `json:"authenticated"`
		Message       json.RawMessage `json:"message"`
	}
	if json.Unmarshal(raw, &goMsgs) != nil || len(goMsgs) != 1 || goMsgs[0].From != id.DID || !goMsgs[0].Authenticated || !bytes.Contains(goMsgs[0].Message, []byte("from the browser leaf")) {
		t.Fatalf("the Go leaf's messages: %s", raw)
	}
	if _, err := gl.SendMessage(id.DID, []byte(`{"type":"`+basicMessage+`","body":{"content":"from the Go leaf"}}`)); err != nil {
		t.Fatal(err)
	}
	if s := goWake(); s.OutboxSent != 1 {
		t.Fatalf("the Go leaf sent %d outbox messages, want 1", s.OutboxSent)
	}
	alignToWindow()
	res = js.run(t, map[string]any{"op": "wake"}, map[string]any{"op": "messages"})
	if s := summaryOf(t, res[0]); s.PickedUp != 1 {
		t.Fatalf("the browser leaf picked up %d messages from the Go leaf, want 1", s.PickedUp)
	}
	msgs = nil
	if json.Unmarshal(res[1], &msgs) != nil || len(msgs) != 2 || msgs[1].Message.Body.Content != "from the Go leaf" || msgs[1].From != gl.DID() || !msgs[1].Authenticated {
		t.Fatalf("messages after the Go leaf's: %s", res[1])
	}

	// Receipts: once the windows of both pickups have closed, a wake
	// co-signs them with the home (which may not have saved the latest
	// window yet: the leaf then proposes it again at its next wake).
	var rs []map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(webLeafWindow/2 + 100*time.Millisecond) // wait for the window to close
		res = js.run(t, map[string]any{"op": "wake"}, map[string]any{"op": "receipts"})
		s := summaryOf(t, res[0])
		if json.Unmarshal(res[1], &rs) != nil {
			t.Fatalf("receipts: %s", res[1])
		}
		// Both pickups may fall in different windows: wait until the
		// receipts co-signed so far cover both, not just the first.
		if s.ReceiptsLeft == 0 && len(rs) > 0 && homeGaveIn(receiptsFull(t, home, id.DID), id.DID) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receipts covering both pickups co-signed within 30 s: last wake %s, receipts %s", res[0], res[1])
		}
	}
	verifyReceipts(t, home, id.DID)
	at := receiptsFull(t, home, id.DID)
	if len(at) != len(rs) {
		t.Fatalf("the home holds %d receipts of the browser leaf, the leaf %d", len(at), len(rs))
	}
	var leafGot, homeGave uint64
	for i, r := range rs {
		if r["cid"] != at[i].CID || r["disputed"] != false {
			t.Fatalf("receipt %d: the leaf holds %v, the home %s", i, r["cid"], at[i].CID)
		}
		ls, hs := at[i].CountsA, at[i].CountsB
		if at[i].A != id.DID {
			ls, hs = hs, ls
		}
		if ls.Received.MediationMessages != hs.Gave.MediationMessages {
			t.Fatalf("receipt %d: the leaf received %d mediated messages, the home gave %d", i, ls.Received.MediationMessages, hs.Gave.MediationMessages)
		}
		leafGot += ls.Received.MediationMessages
		homeGave += hs.Gave.MediationMessages
	}
	if leafGot != 2 || homeGave != 2 {
		t.Fatalf("mediation messages: the leaf received %d, the home gave %d, want the 2 picked up on both sides", leafGot, homeGave)
	}

	scanForKeyMaterial(t, js.seed, js.sent)
}

// homeGaveIn sums the mediated messages the home gave leaf in receipts.
func homeGaveIn(rs []fullReceipt, leaf string) uint64 {
	var n uint64
	for _, r := range rs {
		if r.A == leaf {
			n += r.CountsB.Gave.MediationMessages
		} else {
			n += r.CountsA.Gave.MediationMessages
		}
	}
	return n
}

type fullReceipt struct {
	CID     string `json:"cid"`
	A       string `json:"a"`
	CountsA struct {
		Gave, Received struct {
			MediationMessages uint64 `json:"mediation_messages"`
		}
	} `json:"counts_a"`
	CountsB struct {
		Gave, Received struct {
			MediationMessages uint64 `json:"mediation_messages"`
		}
	} `json:"counts_b"`
}

func receiptsFull(t *testing.T, home, did string) []fullReceipt {
	t.Helper()
	out, errOut, err := cli(t, "receipts", "--home", home, "--node", did, "--json")
	if err != nil {
		t.Fatalf("fleetmesh receipts: %v\n%s", err, errOut)
	}
	var rs []fullReceipt
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("receipts --json printed %q: %v", out, err)
	}
	return rs
}

// scanForKeyMaterial fails if any request the browser leaf made carries
// its Ed25519 seed, its expanded private key, or its X25519 private key
// (clamped or not), as raw bytes, hex (either case), base64 or base64url
// (padded or not) or base58, in its URL, headers or body.
func scanForKeyMaterial(t *testing.T, seed []byte, sent []jsRequest) {
	t.Helper()
	if len(sent) == 0 {
		t.Fatal("the browser leaf sent nothing: nothing to scan")
	}
	key, err := identity.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	h := sha512.Sum512(seed)
	secrets := map[string][]byte{
		"seed":                  seed,
		"expanded private key":  key.PrivateKey(),
		"X25519 private key":    key.X25519Private(),
		"X25519 scalar (raw)":   h[:32],
		"SHA-512 of the seed":   h[:],
		"seed's last 16 bytes":  seed[16:],
		"seed's first 16 bytes": seed[:16],
	}
	var forms []struct{ what, text string }
	for what, b := range secrets {
		for enc, s := range map[string]string{
			"raw":             string(b),
			"hex":             hex.EncodeToString(b),
			"HEX":             strings.ToUpper(hex.EncodeToString(b)),
			"base64":          base64.StdEncoding.EncodeToString(b),
			"base64 unpadded": base64.RawStdEncoding.EncodeToString(b),
			"base64url":       base64.URLEncoding.EncodeToString(b),
			"base64url nopad": base64.RawURLEncoding.EncodeToString(b),
			"base58":          base58.Encode(b),
			"JSON byte array": strings.Trim(strings.Join(strings.Fields(fmt.Sprint(b)), ","), "[]"),
		} {
			forms = append(forms, struct{ what, text string }{what + " as " + enc, s})
		}
	}
	scanned := 0
	for _, r := range sent {
		var hdrs strings.Builder
		for k, v := range r.Headers {
			hdrs.WriteString(k + ": " + v + "\n")
		}
		for _, f := range forms {
			for part, text := range map[string]string{"URL": r.URL, "headers": hdrs.String(), "body": r.Body} {
				if strings.Contains(text, f.text) {
					t.Fatalf("the browser leaf sent its %s in the %s of %s %s", f.what, part, r.Method, r.URL)
				}
			}
		}
		scanned += len(r.Body)
	}
	t.Logf("scanned %d requests (%d body bytes) for %d forms of key material", len(sent), scanned, len(forms))
}
