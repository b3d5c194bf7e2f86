package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBackupAndRestore follows docs/operators.md's "Backups and restore":
// `fleetmesh backup` of a running node (taken through it) and of the same
// node stopped (taken from the home), then scripts/restore.sh puts each in
// place of the home, and the node started there is the same node and
// serves every event the backup was taken after.
func TestBackupAndRestore(t *testing.T) {
	home := newHome(t, nodeConfig(nil))
	n := startMeshNode(t, home)
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n *meshNode, count int, what string) []string {
		t.Helper()
		var ids []string
		for i := range count {
			ids = append(ids, publishAt(t, n, u, randomContent(fmt.Sprintf("%s %d", what, i))))
		}
		return ids
	}
	before := publish(n, 30, "before the backup")

	dir := t.TempDir()
	live, stopped := filepath.Join(dir, "live"), filepath.Join(dir, "stopped")
	out, errOut, err := cli(t, "backup", "--home", home, "--out", live)
	if err != nil || !strings.Contains(out, "through the running node") || !strings.Contains(out, "did "+n.did) {
		t.Fatalf("fleetmesh backup of the running node: %v\n%s%s", err, out, errOut)
	}
	if m, _ := filepath.Glob(filepath.Join(live, "data", "MANIFEST-*")); len(m) == 0 {
		t.Fatal("the backup's data/ holds no Pebble manifest")
	}
	for _, f := range []string{"node.key", "config.toml", "fleetmesh-backup.json", "accounting/accounting.db", "didcomm/mediator/mediator.db"} {
		st, err := os.Stat(filepath.Join(live, f))
		if err != nil {
			t.Fatalf("the backup lacks %s: %v", f, err)
		}
		if f == "node.key" && st.Mode().Perm() != 0o600 {
			t.Fatalf("the backup's node.key has mode %o, want 600", st.Mode().Perm())
		}
	}
	for _, f := range []string{"node.run", "node.lock"} {
		if _, err := os.Stat(filepath.Join(live, f)); err == nil {
			t.Fatalf("the backup holds %s, which belongs to the running process", f)
		}
	}
	after := publish(n, 5, "after the backup")
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = cli(t, "backup", "--home", home, "--out", stopped)
	if err != nil || !strings.Contains(out, "from the stopped home") {
		t.Fatalf("fleetmesh backup of the stopped home: %v\n%s%s", err, out, errOut)
	}
	if _, errOut, err := cli(t, "backup", "--home", home, "--out", stopped); err == nil || !strings.Contains(errOut, "exists") {
		t.Fatalf("a backup over an existing directory: %v %s, want a refusal", err, errOut)
	}

	for _, tc := range []struct {
		backup string
		serves []string
	}{
		{live, before},
		{stopped, append(append([]string{}, before...), after...)},
	} {
		cmd := exec.Command("bash", filepath.Join(moduleRoot, "scripts", "restore.sh"), tc.backup, home)
		cmd.Env = append(os.Environ(), "FLEETMESH_LAB=1")
		if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "is now the backup of "+n.did) {
			t.Fatalf("restore.sh %s: %v\n%s", tc.backup, err, b)
		}
		r := startMeshNode(t, home)
		if r.did != n.did {
			t.Fatalf("the restored node is %s, want %s", r.did, n.did)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		found, err := fetchIDs(ctx, r.url, tc.serves, 100)
		cancel()
		if err != nil || len(found) != len(tc.serves) {
			t.Fatalf("the node restored from %s serves %d of %d events (%v)\n%s", filepath.Base(tc.backup), len(found), len(tc.serves), err, r.output())
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}
