package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needWeb fails (never skips) the test when the browser leaf's test
// dependencies are missing: scripts/test.sh installs them.
func needWeb(t *testing.T) {
	t.Helper()
	needBinary(t)
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatal("chromium is missing (apt-get install chromium; scripts/test.sh does)")
	}
	if _, err := os.Stat(filepath.Join(moduleRoot, "web", "node_modules", "playwright-core")); err != nil {
		t.Fatal("web/node_modules is missing: run `cd web && npm ci` (scripts/test.sh does)")
	}
}

// TestNodePage: a browser asking a node's root for HTML gets the node's
// page (its DID, class, relay URL, health, a link to /app/); a Nostr
// client asking for NIP-11 still gets the JSON document; /app/ is the app
// (HTML linking a manifest, which is served with its type).
func TestNodePage(t *testing.T) {
	needBinary(t)
	n := startNode(t, newHome(t, nodeConfig(nil)))
	get := func(path, accept string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, n.httpURL()+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, body := get("/", "text/html,application/xhtml+xml,*/*;q=0.8")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("GET / as a browser: Content-Type %q\n%s", ct, body)
	}
	for _, want := range []string{n.did, `id="class">home<`, n.url, `class="ok">healthy`, `href="/app/"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the node's page lacks %q:\n%s", want, body)
		}
	}
	resp, body = get("/", "application/nostr+json")
	var doc struct {
		Software  string            `json:"software"`
		FleetMesh map[string]string `json:"fleetmesh"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || resp.Header.Get("Content-Type") != "application/nostr+json" || doc.FleetMesh["did"] != n.did {
		t.Fatalf("NIP-11: %v %q %+v", err, resp.Header.Get("Content-Type"), doc)
	}
	resp, body = get("/app/", "text/html")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `rel="manifest" href="manifest.webmanifest"`) || !strings.Contains(body, `src="app.js"`) {
		t.Fatalf("/app/ is not the app:\n%s", body)
	}
	resp, _ = get("/app/manifest.webmanifest", "")
	if ct := resp.Header.Get("Content-Type"); ct != "application/manifest+json" {
		t.Errorf("manifest Content-Type %q", ct)
	}
}

// pwaResult is what web/test/pwa.mjs saw in chromium.
type pwaResult struct {
	Steps        []string `json:"steps"`
	Error        string   `json:"error"`
	PageErrors   []string `json:"pageErrors"`
	DID          string   `json:"did"`
	HomeDID      string   `json:"homeDID"`
	PickedUp     string   `json:"pickedUp"`
	Reply        string   `json:"reply"`
	OwnName      string   `json:"ownName"`
	Pubkey       string   `json:"pubkey"`
	Note         string   `json:"note"`
	Elsewhere    string   `json:"elsewhere"`
	NegFrames    int      `json:"negFrames"`
	Method       string   `json:"method"`
	Offline      []string `json:"offline"`
	FromSW       bool     `json:"fromSW"`
	OfflineShown string   `json:"offlineShown"`
	CachedFeed   int      `json:"cachedFeed"`
	Refusals     []string `json:"refusals"`
	Leaked       int      `json:"leaked"`
	Shots        []string `json:"shots"`
	OpenBefore   int      `json:"openBefore"`
	OpenHidden   int      `json:"openHidden"`
	OpenShown    int      `json:"openShown"`
	NIP07Pubkey  string   `json:"nip07Pubkey"`
	NIP07Note    string   `json:"nip07Note"`
	NIP07Kind    string   `json:"nip07Kind"`
}

// TestBrowserLeaf runs the browser leaf (web/) in Debian's chromium
// against two real mesh nodes (web/test/pwa.mjs drives it): the app
// opens at /app/, shows its did:key and pairs with its home by DIDComm; a
// DIDComm message a Go leaf sends it while its page is closed is picked
// up on reopening, and its reply reaches the Go leaf through the same
// home; a note it publishes is stored on
// its home and reaches the other node; a note published on the other
// node while the page is closed appears on reopening, fetched by
// negentropy (NEG messages counted on the home's metrics and in the
// page's frames); two notes written offline survive a reload from the
// service worker and are stored once each when back online; a note
// carrying the app's secret key is refused and no frame carries it; 30 s
// after the page is hidden no socket is open, and shown again it catches
// up; with a NIP-07 signer (window.nostr) notes are signed by it;
// screenshots of feed, compose and status at phone and desktop sizes are
// saved in the artifact directory.
func TestBrowserLeaf(t *testing.T) {
	needWeb(t)
	cfg := nodeConfig(nil) + meshConfig
	home := startMeshNode(t, newHome(t, cfg))
	other := startMeshNode(t, newHome(t, cfg), home.mesh)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// The Go leaf, paired with the same home before the browser opens.
	leafHome := newHome(t, "")
	invOut, errOut, err := cli(t, "invite", "--home", home.home, "--json")
	if err != nil {
		t.Fatalf("invite: %v\n%s", err, errOut)
	}
	var inv struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal([]byte(invOut), &inv); err != nil {
		t.Fatalf("invite --json printed %q: %v", invOut, err)
	}
	goLeaf := func(args ...string) map[string]any {
		t.Helper()
		out, errOut, err := cli(t, append([]string{"leaf", "--home", leafHome, "--once", "--budget", "20s"}, args...)...)
		var s map[string]any
		if err != nil || json.Unmarshal([]byte(strings.TrimSpace(out)), &s) != nil || s["error"] != nil && s["error"] != "" {
			t.Fatalf("the Go leaf's wake: %v\n%s\n%s", err, out, errOut)
		}
		return s
	}
	goLeaf("--pair", inv.Code)
	idOut, _, err := cli(t, "id", "--home", leafHome)
	var leafID struct {
		DID string `json:"did"`
	}
	if err != nil || json.Unmarshal([]byte(idOut), &leafID) != nil {
		t.Fatalf("id: %v %q", err, idOut)
	}
	greeting := "hello from the Go leaf " + randomContent("g")

	shots := artifactDir(t)
	args, _ := json.Marshal(map[string]string{"home": home.httpURL(), "other": other.url, "shots": shots})
	cmd := exec.CommandContext(ctx, "node", "--experimental-websocket", filepath.Join("test", "pwa.mjs"), string(args))
	cmd.Dir = filepath.Join(moduleRoot, "web")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got pwaResult
	var last string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		last = sc.Text()
		var ask struct {
			Ask *struct {
				DIDComm string `json:"didcomm"`
			} `json:"ask"`
		}
		if json.Unmarshal([]byte(last), &ask) == nil && ask.Ask != nil {
			// While the page is closed: the Go leaf's key sends the browser
			// leaf a message through the home's mediator.
			msg := fmt.Sprintf(`{"type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":%q}}`, greeting)
			c := exec.CommandContext(ctx, binary, "didcomm", "send", "--home", leafHome, "--to", ask.Ask.DIDComm, "--via", home.httpURL()+"/didcomm")
			c.Stdin = strings.NewReader(msg)
			if out, err := c.CombinedOutput(); err != nil {
				t.Errorf("didcomm send to the browser leaf: %v\n%s", err, out)
			}
			fmt.Fprintf(stdin, "{\"from\":%q}\n", leafID.DID)
			stdin.Close()
		}
	}
	err = cmd.Wait()
	if jerr := json.Unmarshal([]byte(last), &got); jerr != nil || err != nil || got.Error != "" {
		t.Fatalf("pwa.mjs: %v %v\n%s\n%s\n%s", err, jerr, last, stderr.String(), home.output())
	}
	t.Logf("steps: %v", got.Steps)
	if !strings.HasPrefix(got.DID, "did:key:z6Mk") || got.HomeDID != home.did {
		t.Errorf("the app showed DID %q paired with %q, want a did:key paired with the home %s", got.DID, got.HomeDID, home.did)
	}
	if got.PickedUp != greeting {
		t.Errorf("the browser leaf picked up %q, want the Go leaf's %q", got.PickedUp, greeting)
	}
	if !strings.Contains(got.OwnName, "pwa tester") {
		t.Errorf("the feed names the author %q, want the profile name", got.OwnName)
	}
	// The Go leaf picks up the browser leaf's reply from the same home.
	if s := goLeaf(); s["picked_up"] != float64(1) {
		t.Errorf("the Go leaf picked up %v messages, want the browser leaf's reply (%q): %v", s["picked_up"], got.Reply, s)
	}
	if len(got.PageErrors) > 0 {
		t.Errorf("the page threw: %v", got.PageErrors)
	}

	// The note is stored on the home and reaches the other node.
	waitNote := func(n *meshNode, content string) {
		t.Helper()
		for {
			evs, err := query(ctx, n.url, map[string]any{"authors": []string{got.Pubkey}, "kinds": []int{1}})
			if err != nil {
				t.Fatal(err)
			}
			count := 0
			for _, e := range evs {
				if e.Content == content {
					count++
				}
			}
			if count > 1 {
				t.Fatalf("%q stored %d times on %s", content, count, n.url)
			}
			if count == 1 {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%q never reached %s", content, n.url)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, c := range append([]string{got.Note}, got.Offline...) {
		waitNote(home, c)
		waitNote(other, c)
	}

	// The note from elsewhere came by negentropy.
	fams, err := metrics(ctx, home.node)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := sample(fams, "fleetmesh_relay_neg_messages_total", "type", "open"); v < 2 || got.NegFrames == 0 || !strings.Contains(got.Method, "negentropy") {
		t.Errorf("catch-up: %v NEG-OPENs on the home, %d NEG frames from the reopened page, method %q", v, got.NegFrames, got.Method)
	}

	// Offline: the shell came from the service worker with the cached feed.
	if !got.FromSW || got.OfflineShown != "offline" || got.CachedFeed == 0 {
		t.Errorf("offline reload: from the service worker %v, shown %q, %d notes in the feed", got.FromSW, got.OfflineShown, got.CachedFeed)
	}

	// The boundary: every try refused, nothing leaked, nothing stored.
	for _, r := range got.Refusals {
		if !strings.HasPrefix(r, "refused:") {
			t.Errorf("a note carrying the app's key was not refused: %q", r)
		}
	}
	if len(got.Refusals) == 0 || got.Leaked != 0 {
		t.Errorf("boundary: %d tries, %d frames carried the key", len(got.Refusals), got.Leaked)
	}
	evs, err := query(ctx, home.url, map[string]any{"authors": []string{got.Pubkey}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if strings.Contains(strings.ToLower(e.Content), "nsec1") || strings.HasPrefix(e.Content, "hex ") || strings.HasPrefix(e.Content, "split ") {
			t.Errorf("the home stored a note the app should have refused: %q", e.Content)
		}
	}

	// Hidden for 30 s (the page's clock run forward): no socket open;
	// shown again: connected and caught up.
	if got.OpenBefore == 0 || got.OpenHidden != 0 || got.OpenShown == 0 {
		t.Errorf("sockets open: %d visible, %d 30 s after hidden, %d shown again", got.OpenBefore, got.OpenHidden, got.OpenShown)
	}

	// With a NIP-07 signer the note is the signer's, not a local key's.
	if !strings.Contains(got.NIP07Kind, "browser signer") {
		t.Errorf("with window.nostr the identity view says %q", got.NIP07Kind)
	}
	if evs, err := query(ctx, home.url, map[string]any{"authors": []string{got.NIP07Pubkey}, "kinds": []int{1}}); err != nil || len(evs) != 1 || evs[0].Content != got.NIP07Note {
		t.Errorf("the NIP-07 signer's note on the home: %v %+v", err, evs)
	}

	if len(got.Shots) != 6 {
		t.Errorf("screenshots: %v", got.Shots)
	}
	for _, s := range got.Shots {
		if st, err := os.Stat(s); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s: %v", s, err)
		}
	}
	t.Logf("screenshots in %s", shots)
}

// TestPWABenchmark measures the browser leaf for docs/benchmarks/pwa.md:
// the app shell's gzipped size, catch-up of the 200 newest missing of
// 10,000 stored notes by negentropy against since REQs (and both in
// sync), and the offline second load under 4x CPU throttling. It runs
// only with FLEETMESH_PWA_BENCH=1 (about a minute and a half):
//
//	FLEETMESH_PWA_BENCH=1 go test -count=1 -v -run TestPWABenchmark ./e2e/
func TestPWABenchmark(t *testing.T) {
	if os.Getenv("FLEETMESH_PWA_BENCH") == "" {
		t.Skip("a benchmark: set FLEETMESH_PWA_BENCH=1 to run it (docs/benchmarks/pwa.md)")
	}
	needWeb(t)
	n := startNode(t, newHome(t, nodeConfig(nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args, _ := json.Marshal(map[string]string{"home": n.httpURL()})
	cmd := exec.CommandContext(ctx, "node", "--experimental-websocket", filepath.Join("test", "bench.mjs"), string(args))
	cmd.Dir = filepath.Join(moduleRoot, "web")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	var pretty strings.Builder
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("bench.mjs printed %q: %v", out, err)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	pretty.Write(b)
	t.Logf("%s", pretty.String())
}
