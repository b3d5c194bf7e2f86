package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Paths set up once by TestMain for every test.
var (
	// binary is the fleetmesh binary built from this module.
	binary string
	// moduleRoot is the directory of go.mod.
	moduleRoot string
	// setupErr, if set, fails every test that needs the binary.
	setupErr error
)

// buildTimeout bounds the one build of the binary.
const buildTimeout = 5 * time.Minute

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleetmesh-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	moduleRoot, binary, setupErr = build(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(dir string) (root, bin string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", "", fmt.Errorf("not inside the fleetmesh module (go env GOMOD = %q)", gomod)
	}
	root = filepath.Dir(gomod)
	bin = filepath.Join(dir, "fleetmesh")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/fleetmesh")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/fleetmesh: %w\n%s", err, stderr.String())
	}
	return root, bin, nil
}

// needBinary fails the test if the binary could not be built.
func needBinary(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("e2e setup: %v", setupErr)
	}
}

// needNode fails (never skips) the test if Node or interop/node_modules is
// missing: CI always installs them, so their absence is a broken setup.
func needNode(t *testing.T) {
	t.Helper()
	needBinary(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the nostr-tools end-to-end tests need Node 20 (apt-get install nodejs npm)")
	}
	mods := filepath.Join(moduleRoot, "interop", "node_modules", "nostr-tools")
	if _, err := os.Stat(mods); err != nil {
		t.Fatalf("%s is missing: run `cd interop && npm ci` (scripts/test.sh does)", mods)
	}
}
