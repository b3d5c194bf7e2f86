package iroh

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies the regular files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheck: Check loads the native binding as the helper would, and
// names what is missing and the fix.
func TestCheck(t *testing.T) {
	real := helperDir(t)
	// helper makes a helper directory with helper.mjs and, if pkg, the
	// @number0/iroh package without its native binding package.
	helper := func(pkg bool) string {
		dir := t.TempDir()
		b, err := os.ReadFile(filepath.Join(real, "helper.mjs"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "helper.mjs"), b, 0o644)
		if pkg {
			copyTree(t, filepath.Join(real, "node_modules", "@number0", "iroh"), filepath.Join(dir, "node_modules", "@number0", "iroh"))
		}
		return dir
	}
	// old is a "node" that says it is Node.js 18.20.4 (Debian 12's), by
	// running the real one with process.versions.node replaced.
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "node18")
	os.WriteFile(old, []byte("#!/bin/sh\nexec "+node+" --import 'data:text/javascript,Object.defineProperty(process.versions,\"node\",{value:\"18.20.4\"})' \"$@\"\n"), 0o755)
	for _, tc := range []struct {
		name, node, dir, want string
	}{
		{"installed", "node", real, ""},
		{"no Node.js", "no-such-node", real, `Node.js "no-such-node" not found (install Node.js 20.3 or later`},
		{"no helper.mjs", "node", t.TempDir(), "no helper.mjs in"},
		{"no @number0/iroh", "node", helper(false), "@number0/iroh is not installed in"},
		{"no native binding", "node", helper(true), "the native binding of @number0/iroh does not load on linux-x64: Cannot find module '@number0/iroh-linux-x64-gnu'"},
		{"Node.js too old", old, real, "Node.js 18.20.4 is too old: @number0/iroh needs Node.js 20.3 or later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(Config{Node: tc.node, HelperDir: tc.dir})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v, want ErrUnavailable with %q", err, tc.want)
			}
		})
	}
}

// TestBound: the platforms with a binding on the registry, and the ones a
// node runs on without one (spec/iroh.md, "Platforms without a binding").
func TestBound(t *testing.T) {
	for _, tc := range []struct {
		goos, goarch string
		want         bool
	}{
		{"linux", "amd64", true},
		{"darwin", "arm64", true},
		{"linux", "arm64", false}, // Raspberry Pi 4/5
		{"linux", "arm", false},   // Raspberry Pi 2/3, 32-bit
		{"android", "arm64", false},
		{"ios", "arm64", false},
		{"windows", "amd64", false},
		{"darwin", "amd64", false},
	} {
		if got := Bound(tc.goos, tc.goarch); got != tc.want {
			t.Errorf("Bound(%s, %s) = %v, want %v", tc.goos, tc.goarch, got, tc.want)
		}
	}
}
