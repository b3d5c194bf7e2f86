package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDiskFull runs a node whose store lives on a small tmpfs (mounted
// here; the test needs root and says so otherwise) with a small
// storage_max_bytes. It fills the filesystem with a ballast file, then
// fills the store to its bound, and checks each time that the node keeps
// serving reads, refuses writes with a clear "error: storage full: …",
// takes writes again when space returns (the ballast removed, the bound
// raised), and, after kill -9, still serves every event it acknowledged.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("TestDiskFull mounts a tmpfs and needs root; run the e2e tests as root to include it")
	}
	const fsBytes = 256 << 20
	// publish opens a connection per event, hundreds a second on a quiet
	// machine: the per-address connection rate (spec/limits.md) is lifted,
	// since this test is about the disk.
	config := func(maxBytes int) string {
		return nodeConfig(map[string]string{"max_event_bytes": "65536", "ip_connections_per_second": "100000"}) + fmt.Sprintf("\n[mesh]\nstorage_max_bytes = %d\n", maxBytes)
	}
	home := newHome(t, config(64<<20))
	data := filepath.Join(home, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", fsBytes), "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestDiskFull needs mount rights", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", data).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", data, err, out)
		}
	})
	n := startNode(t, home)

	alice, _ := newUser()
	var acked []string
	seq := 0
	// publish sends one event of size bytes and returns its OK.
	publish := func(size int) okMessage {
		t.Helper()
		seq++
		e, err := alice.sign(1, fmt.Sprintf("%d %s", seq, strings.Repeat("x", size)), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := dial(ctx, n.url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m, err := publishOne(c, e)
		if err != nil {
			t.Fatalf("publish: %v\n%s", err, n.output())
		}
		if m.Accepted {
			acked = append(acked, e.ID)
		}
		return m
	}
	// untilRefused publishes until the node refuses, bounded.
	untilRefused := func(what string, size, most int) okMessage {
		t.Helper()
		for range most {
			if m := publish(size); !m.Accepted {
				return m
			}
		}
		t.Fatalf("%s: %d events of %d bytes all accepted\n%s", what, most, size, n.output())
		return okMessage{}
	}
	untilAccepted := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !publish(100).Accepted {
			if time.Now().After(deadline) {
				t.Fatalf("%s: writes not taken again\n%s", what, n.output())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	allServed := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		found, err := fetchIDs(ctx, n.url, acked, 100)
		if err != nil {
			t.Fatalf("%s: reads fail: %v\n%s", what, err, n.output())
		}
		for _, id := range acked {
			if !found[id] {
				t.Fatalf("%s: acknowledged event %s not served\n%s", what, id, n.output())
			}
		}
	}
	for range 20 {
		if m := publish(100); !m.Accepted {
			t.Fatalf("an empty store refused: %s", m.Message)
		}
	}

	// The filesystem nearly full: a ballast leaves 24 MiB free, under the reserve (39 MiB).
	var st syscall.Statfs_t
	if err := syscall.Statfs(data, &st); err != nil {
		t.Fatal(err)
	}
	// In its own directory: the store counts the files of its own.
	if err := os.Mkdir(filepath.Join(data, "other"), 0o700); err != nil {
		t.Fatal(err)
	}
	ballast := filepath.Join(data, "other", "ballast")
	if err := os.WriteFile(ballast, make([]byte, int64(st.Bavail)*st.Bsize-24<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	m := untilRefused("disk nearly full", 100, 200)
	if !strings.HasPrefix(m.Message, "error: storage full:") || !strings.Contains(m.Message, "free") {
		t.Fatalf("refusal on a full disk: %q, want \"error: storage full: … free …\"", m.Message)
	}
	allServed("disk nearly full")
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	untilAccepted("ballast removed")

	// The store at its bound (64 MiB on disk, its WALs' preallocated
	// space included): 32 KiB events until refused.
	m = untilRefused("store at its bound", 32<<10, 4000)
	if !strings.HasPrefix(m.Message, "error: storage full:") || !strings.Contains(m.Message, "storage_max_bytes") {
		t.Fatalf("refusal at the bound: %q, want \"error: storage full: … storage_max_bytes …\"", m.Message)
	}
	allServed("store at its bound")

	// kill -9, a larger bound: nothing acknowledged is lost, writes resume.
	n.kill()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config(192<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, home)
	allServed("after kill -9")
	untilAccepted("bound raised")
	allServed("at the end")
	if strings.Contains(n.stderr.String(), "panic") {
		t.Fatalf("the node panicked\n%s", n.output())
	}
}
