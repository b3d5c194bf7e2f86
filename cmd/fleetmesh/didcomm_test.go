package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/identity"
)

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
		{"no verb", "", []string{"didcomm"}, 2, "pack|unpack"},
		{"unknown verb", "", []string{"didcomm", "shout"}, 2, "unknown didcomm verb"},
		{"bad mode", "{}", []string{"didcomm", "pack", "--home", home, "--mode", "loud"}, 2, "unknown mode"},
		{"bad flag", "{}", []string{"didcomm", "pack", "--nope"}, 2, "flag provided but not defined"},
		{"no key", "{}", []string{"didcomm", "unpack", "--home", empty}, 1, "fleetmesh init --home"},
		{"no home", "{}", []string{"didcomm", "unpack"}, 2, "--home DIR is required"},
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
