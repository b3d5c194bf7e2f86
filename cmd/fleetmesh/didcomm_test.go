package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/standing"
)

// fileExists reports whether path exists.
func fileExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// nodeHome makes a home directory with a node key, as `fleetmesh init` does.
func nodeHome(t *testing.T) (string, *identity.Key) {
	t.Helper()
	dir := t.TempDir()
	k, _, err := identity.LoadOrCreateKey(filepath.Join(dir, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, k
}

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = realMain(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestDIDCommPackUnpackCLI(t *testing.T) {
	alice, aliceKey := nodeHome(t)
	bob, bobKey := nodeHome(t)
	plain := `{"id":"m1","type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":"hi"}}`
	for _, tc := range []struct {
		mode, wantMode string
		authenticated  bool
	}{
		{"authcrypt", "authcrypt", true},
		{"anoncrypt", "anoncrypt", false},
		{"signed", "signed", true},
		{"plaintext", "plaintext", false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			code, packed, stderr := runCLI(t, plain, "didcomm", "pack", "--home", alice, "--to", bobKey.DID(), "--mode", tc.mode)
			if code != 0 {
				t.Fatalf("pack exit %d: %s", code, stderr)
			}
			code, out, stderr := runCLI(t, packed, "didcomm", "unpack", "--home", bob)
			if code != 0 {
				t.Fatalf("unpack exit %d: %s", code, stderr)
			}
			var res unpackResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			if res.Mode != tc.wantMode || res.Authenticated != tc.authenticated || res.Message.ID != "m1" {
				t.Fatalf("unpack printed %s", out)
			}
			if tc.authenticated && res.Sender != aliceKey.DID() {
				t.Fatalf("sender %q, want %s", res.Sender, aliceKey.DID())
			}
		})
	}
}

// TestDIDCommHonoursFleetmeshHome: with no --home, the didcomm verbs use
// $FLEETMESH_HOME, as every other command does.
func TestDIDCommHonoursFleetmeshHome(t *testing.T) {
	alice, aliceKey := nodeHome(t)
	bob, bobKey := nodeHome(t)
	plain := `{"id":"m2","type":"https://didcomm.org/basicmessage/2.0/message","body":{}}`
	t.Setenv("FLEETMESH_HOME", alice)
	code, packed, stderr := runCLI(t, plain, "didcomm", "pack", "--to", bobKey.DID())
	if code != 0 {
		t.Fatalf("pack exit %d: %s", code, stderr)
	}
	t.Setenv("FLEETMESH_HOME", bob)
	code, out, stderr := runCLI(t, packed, "didcomm", "unpack")
	var res unpackResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Sender != aliceKey.DID() {
		t.Fatalf("unpack exit %d: %s %s", code, out, stderr)
	}
	t.Setenv("FLEETMESH_HOME", t.TempDir())
	if code, _, stderr := runCLI(t, packed, "didcomm", "unpack"); code != 1 || !strings.Contains(stderr, "fleetmesh init --home") {
		t.Fatalf("unpack with an empty $FLEETMESH_HOME: exit %d %s", code, stderr)
	}
}

func TestDIDCommCLIErrors(t *testing.T) {
	home, k := nodeHome(t)
	empty := t.TempDir()
	for _, tc := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{"no verb", "", []string{"didcomm"}, 2, "needs a verb: invite, mediate, pack"},
		{"unknown verb", "", []string{"didcomm", "shout"}, 2, "unknown didcomm verb"},
		{"bad mode", "{}", []string{"didcomm", "pack", "--home", home, "--mode", "loud"}, 2, "unknown mode"},
		{"bad flag", "{}", []string{"didcomm", "pack", "--nope"}, 2, "flag provided but not defined"},
		{"no key", "{}", []string{"didcomm", "unpack", "--home", empty}, 1, "fleetmesh init --home"},
		{"empty home", "{}", []string{"didcomm", "unpack", "--home", ""}, 2, "--home DIR is required"},
		{"encrypt to nobody", `{"type":"x","body":{}}`, []string{"didcomm", "pack", "--home", home}, 2, "needs --to"},
		{"garbage to unpack", "hello", []string{"didcomm", "unpack", "--home", home}, 1, "e.p.msg.malformed"},
		{"not a message", "[1]", []string{"didcomm", "pack", "--home", home, "--to", k.DID()}, 1, "not a DIDComm plaintext"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.stdin, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}

// anchorService serves an agent.Service over HTTP in this process.
func anchorService(t *testing.T) (url string, did string) {
	t.Helper()
	home, k := nodeHome(t)
	svc, err := agent.New(k, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/didcomm", svc)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		svc.Close()
	})
	return srv.URL + "/didcomm", k.DID()
}

func TestDIDCommLeafVerbs(t *testing.T) {
	url, anchorDID := anchorService(t)
	leaf, leafKey := nodeHome(t)
	sender, senderKey := nodeHome(t)

	code, out, stderr := runCLI(t, "", "didcomm", "ping", "--home", sender, "--endpoint", url)
	if code != 0 || !strings.Contains(out, anchorDID) {
		t.Fatalf("ping: %d %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "didcomm", "invite", "--home", sender, "--endpoint", url, "--qr")
	if code != 0 || !strings.Contains(out, "?_oob=") || !strings.Contains(out, "█") {
		t.Fatalf("invite: %d %s %s", code, out, stderr)
	}
	code, out, stderr = runCLI(t, "", "didcomm", "mediate", "--home", leaf, "--mediator", url)
	if code != 0 || !strings.Contains(out, anchorDID) {
		t.Fatalf("mediate: %d %s %s", code, out, stderr)
	}
	var sent []string
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf(`{"type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":"hello %d"}}`, i)
		code, out, stderr = runCLI(t, msg, "didcomm", "send", "--home", sender, "--to", leafKey.DID(), "--via", url)
		if code != 0 {
			t.Fatalf("send: %d %s", code, stderr)
		}
		var r struct{ ID string }
		_ = json.Unmarshal([]byte(out), &r)
		sent = append(sent, r.ID)
	}
	code, out, stderr = runCLI(t, "", "didcomm", "pickup", "--home", leaf, "--mediator", url, "--limit", "2")
	if code != 0 {
		t.Fatalf("pickup: %d %s", code, stderr)
	}
	got := pickedUp(t, out, senderKey.DID())
	if len(got) != 3 || got[sent[0]] != 1 || got[sent[1]] != 1 || got[sent[2]] != 1 {
		t.Fatalf("picked up %v, sent %v", got, sent)
	}
	code, out, _ = runCLI(t, "", "didcomm", "pickup", "--home", leaf, "--mediator", url)
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Fatalf("second pickup: %d %q", code, out)
	}
	// A sender cannot route to a DID the anchor does not mediate for.
	code, _, stderr = runCLI(t, `{"type":"x","body":{}}`, "didcomm", "send", "--home", sender, "--to", senderKey.DID(), "--via", url)
	if code != 1 || !strings.Contains(stderr, "e.p.trust.unauthorized") {
		t.Fatalf("send to unmediated DID: %d %s", code, stderr)
	}
}

// pickedUp counts the message ids in `didcomm pickup` output and checks
// each came authenticated from sender.
func pickedUp(t *testing.T, out, sender string) map[string]int {
	t.Helper()
	got := map[string]int{}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r unpackResult
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Sender != sender || !r.Authenticated || r.Mode != "authcrypt" {
			t.Fatalf("picked up %+v", r)
		}
		got[r.Message.ID]++
	}
	return got
}

type anchorProc struct {
	cmd     *exec.Cmd
	addr    string // HOST:PORT
	done    chan error
	stopped bool
	stderr  *strings.Builder
}

// startAnchor starts `fleetmesh run` (which serves the DIDComm agent at
// /didcomm on the relay port) and waits for its relay line.
func startAnchor(t *testing.T, bin, home, listen string) *anchorProc {
	t.Helper()
	// `run` makes the home's config if it has none; this one keeps mDNS
	// off, which class auto would run on the machine's network.
	if cfg := filepath.Join(home, config.FileName); !fileExists(t, cfg) {
		if err := os.WriteFile(cfg, []byte("[mesh]\nmdns = 'off'\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "run", "--home", home, "--listen", listen)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &anchorProc{cmd: cmd, done: make(chan error, 1), stderr: &stderr}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "relay ws://"); ok {
				select {
				case lines <- addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	select {
	case p.addr = <-lines:
		return p
	case err := <-p.done:
		t.Fatalf("anchor exited before listening: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("anchor did not print its relay line within 60s")
	}
	return nil
}

// stop ends the anchor with SIGTERM and waits for it to exit cleanly.
func (p *anchorProc) stop(t *testing.T) {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("anchor exited with %v after SIGTERM\n%s", err, p.stderr.String())
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Error("anchor did not stop on SIGTERM within 20s")
	}
}

// buildFleetmesh builds the binary once for the test.
func buildFleetmesh(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fleetmesh")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runBin(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fleetmesh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestDIDCommMediationAcrossRestart: an anchor mediates for a leaf that
// then goes offline; a sender forwards messages to it through the anchor;
// the anchor restarts; the leaf comes back and receives every message
// exactly once. Anchor, leaf and sender are separate processes.
func TestDIDCommMediationAcrossRestart(t *testing.T) {
	bin := buildFleetmesh(t)
	anchorHome, leafHome, senderHome := t.TempDir(), t.TempDir(), t.TempDir()
	leafKey, _, err := identity.LoadOrCreateKey(filepath.Join(leafHome, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	senderKey, _, err := identity.LoadOrCreateKey(filepath.Join(senderHome, "node.key"))
	if err != nil {
		t.Fatal(err)
	}

	anchor := startAnchor(t, bin, anchorHome, "127.0.0.1:0")
	url := "http://" + anchor.addr + "/didcomm"
	runBin(t, bin, "", "didcomm", "mediate", "--home", leafHome, "--mediator", url)
	// The leaf is offline from here on; the sender routes through the anchor.
	const n = 5
	var sent []string
	for i := 0; i < n; i++ {
		out := runBin(t, bin, fmt.Sprintf(`{"type":"https://didcomm.org/basicmessage/2.0/message","body":{"content":"while you were away %d"}}`, i),
			"didcomm", "send", "--home", senderHome, "--to", leafKey.DID(), "--via", url)
		var r struct{ ID string }
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.ID == "" {
			t.Fatalf("send printed %q: %v", out, err)
		}
		sent = append(sent, r.ID)
	}

	anchor.stop(t)
	startAnchor(t, bin, anchorHome, anchor.addr) // same address after the restart

	out := runBin(t, bin, "", "didcomm", "pickup", "--home", leafHome, "--mediator", url, "--limit", "2")
	got := pickedUp(t, out, senderKey.DID())
	if len(got) != n {
		t.Fatalf("leaf received %d distinct messages, want %d: %v", len(got), n, got)
	}
	for _, id := range sent {
		if got[id] != 1 {
			t.Fatalf("message %s received %d times", id, got[id])
		}
	}
	if out := runBin(t, bin, "", "didcomm", "pickup", "--home", leafHome, "--mediator", url); strings.TrimSpace(out) != "" {
		t.Fatalf("second pickup delivered again: %s", out)
	}
}

// TestDIDCommMediateByStanding: of several --mediator endpoints, the one
// whose node has the most standing at the leaf's own node is asked
// first, strangers keep the order given, and with no standing view (no
// node running in --home) the first that answers mediates; an endpoint
// that does not answer is passed over.
func TestDIDCommMediateByStanding(t *testing.T) {
	url1, did1 := anchorService(t)
	url2, did2 := anchorService(t)
	url3, did3 := anchorService(t)
	leaf, _ := nodeHome(t)
	p, err := didcommLoadPeer(leaf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cands, err := mediatorCandidates(ctx, p, url1+", "+url2+","+url3)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		view standingOf
		want []string
	}{
		{nil, []string{did1, did2, did3}},
		{standingOf{did3: 0.01}, []string{did3, did1, did2}},
		{standingOf{did2: 0.01, did3: 0.2}, []string{did3, did2, did1}},
	} {
		cs := slices.Clone(cands)
		var r standing.Reader
		if tc.view != nil {
			r = tc.view
		}
		standing.Order(r, cs, func(c mediatorCandidate) string { return c.Mediator })
		var got []string
		for _, c := range cs {
			got = append(got, c.Mediator)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("standing %v: order %v, want %v", tc.view, got, tc.want)
		}
		if tc.view != nil {
			out, err := askMediation(ctx, p, cs[0])
			if err != nil || out["mediator"] != tc.want[0] {
				t.Fatalf("standing %v: mediation %v %v", tc.view, out, err)
			}
		}
	}
	if r := homeStanding(ctx, leaf); r != nil {
		t.Fatalf("no node runs in %s, yet it has a standing view %v", leaf, r)
	}

	// The CLI: nothing runs in the leaf's home, the first endpoint is
	// dead, the second that answers mediates.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	leaf2, _ := nodeHome(t)
	code, out, stderr := runCLI(t, "", "didcomm", "mediate", "--home", leaf2, "--mediator", dead.URL+"/didcomm,"+url2+","+url1)
	if code != 0 || !strings.Contains(out, did2) || strings.Contains(out, did1) {
		t.Fatalf("mediate: %d %s %s", code, out, stderr)
	}
	code, _, stderr = runCLI(t, "", "didcomm", "mediate", "--home", leaf2, "--mediator", " , ")
	if code != 2 || !strings.Contains(stderr, "--mediator") {
		t.Fatalf("mediate with no endpoint: %d %s", code, stderr)
	}
}
