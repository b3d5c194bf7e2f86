package web

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeTimeout bounds one run of a Node script or of `node --test`.
const nodeTimeout = 2 * time.Minute

// needModules fails the test when web/node_modules is missing: CI installs
// it (scripts/test.sh runs `npm ci` in web/), so a missing one is an
// error, not a reason to skip.
func needModules(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node_modules", "@noble", "curves")); err != nil {
		t.Fatalf("web/node_modules is missing: run `cd web && npm ci` (%v)", err)
	}
}

// runNode sends one JSON request to a script of web/test and decodes its
// JSON answer into out.
func runNode(t testing.TB, script string, req, out any) {
	t.Helper()
	needModules(t)
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("test", script))
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node %s output %q: %v", script, stdout.String(), err)
	}
}

// TestNodeTests runs the browser leaf's own tests under Node
// (web/test/*.test.mjs: known-answer vectors, didcomm-node both ways, the
// leaf's storage, key custody, canonical CBOR and receipt checks).
func TestNodeTests(t *testing.T) {
	needModules(t)
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	files, err := filepath.Glob(filepath.Join("test", "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no web/test/*.test.mjs: %v", err)
	}
	cmd := exec.CommandContext(ctx, "node", append([]string{"--test", "--test-reporter=tap"}, files...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("%s", lastLines(out, 9))
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
