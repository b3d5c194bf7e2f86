// Package nodeinterop runs interop/didcomm/interop.mjs (didcomm-node 0.4.1,
// SICPA's didcomm-rust in WebAssembly) for the interop tests and the
// benchmark of the didcomm packages, and gives it fleetmesh keys and DID
// documents in the shapes didcomm-node reads. It is for tests only.
package nodeinterop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// Timeout bounds one run of the script.
const Timeout = 2 * time.Minute

// interopDir is the repository's interop/ directory, found from this
// file's location so that tests of any package can use it.
func interopDir(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("nodeinterop: cannot locate the source tree")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "interop")
}

// Run sends one JSON request to the script and decodes its answer into
// out. CI always installs interop/node_modules, so a missing one fails the
// test rather than skipping it.
func Run(t testing.TB, req, out any) {
	t.Helper()
	dir := interopDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "didcomm-node")); err != nil {
		t.Fatalf("interop/node_modules/didcomm-node is missing: run `cd interop && npm ci` (%v)", err)
	}
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("didcomm", "interop.mjs"))
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node interop.mjs: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node output %q: %v", stdout.String(), err)
	}
}

var b64 = base64.RawURLEncoding

// Secrets are a node key's private keys as didcomm-node's secrets resolver
// takes them (JsonWebKey2020 with privateKeyJwk), under the did:key
// method ids.
func Secrets(t testing.TB, k *identity.Key) []map[string]any {
	t.Helper()
	sid, err := identity.SigningKeyID(k.DID())
	if err != nil {
		t.Fatal(err)
	}
	kid, err := identity.KeyAgreementID(k.DID())
	if err != nil {
		t.Fatal(err)
	}
	xpub, err := identity.X25519PublicFromEd25519(k.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return []map[string]any{
		{"id": sid, "type": "JsonWebKey2020", "privateKeyJwk": map[string]string{
			"kty": "OKP", "crv": "Ed25519", "x": b64.EncodeToString(k.PublicKey()), "d": b64.EncodeToString(k.PrivateKey().Seed())}},
		{"id": kid, "type": "JsonWebKey2020", "privateKeyJwk": map[string]string{
			"kty": "OKP", "crv": "X25519", "x": b64.EncodeToString(xpub), "d": b64.EncodeToString(k.X25519Private())}},
	}
}

// Docs are the DID documents of dids exactly as identity.Resolve makes
// them: the interop tests prove didcomm-node reads them unchanged.
func Docs(t testing.TB, dids ...string) []*identity.Document {
	t.Helper()
	var out []*identity.Document
	for _, d := range dids {
		doc, err := identity.Resolve(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, doc)
	}
	return out
}
