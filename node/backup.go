package node

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/boltsnap"
	"fleetmesh.org/fleetmesh/manage"
	"fleetmesh.org/fleetmesh/store"
)

// A backup is a copy of a node home that a node can run on as it is
// (docs/operators.md, "Backups and restore"): the event store as a Pebble
// checkpoint, the node's own bbolt databases (accounting, mediation
// queue) each as one read transaction's copy, and every other file as it
// is. It is taken through the running node (BackupPath, over loopback,
// with the RunFile's token), which alone can read its open databases
// consistently, or, when no node runs, from the home directly while
// holding the home's lock.

// BackupPath is where a running node serves a backup of its home (POST),
// as a tar stream, to requests from loopback that carry its RunFile's
// token: whoever can read the home can take it, nobody else.
const BackupPath = "/backup"

// ManifestFile is written last into every backup: what it holds and how it
// was taken. A backup without it is incomplete.
const ManifestFile = "fleetmesh-backup.json"

// BackupManifest is ManifestFile's content.
type BackupManifest struct {
	// DID is the node's identity, from the key in the backup.
	DID string `json:"did"`
	// Taken is when the backup was made.
	Taken time.Time `json:"taken"`
	// Live is true for a backup taken through the running node.
	Live bool `json:"live"`
	// StoreDir is where the store is in the backup, relative to it.
	StoreDir string `json:"store_dir"`
	// Files and Bytes count what the backup holds, the manifest aside.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// backupSink is where a backup goes: a tar stream (from the running node)
// or a directory (from a stopped one).
type backupSink interface {
	dir(rel string) error
	file(rel string, mode fs.FileMode, size int64, write func(w io.Writer) error) error
}

// skipInHome are the home's entries that are not part of a backup: the
// lock and run files, the accounting control socket, and the iroh
// helper's sockets, all of a running process; and the DHT's records of
// other nodes' announcements (DHTDir).
var skipInHome = []string{LockFile, RunFile, RunFile + ".tmp", ControlSocket, IrohDir, DHTDir}

// backupStoreDir is where a backup keeps the store: where the config puts
// it in the home, or "data" when the config names a directory outside.
func backupStoreDir(cfg config.Config) string {
	if d := filepath.Clean(cfg.Store.Dir); !filepath.IsAbs(d) && filepath.IsLocal(d) {
		return filepath.ToSlash(d)
	}
	return "data"
}

// writeBackup writes the backup of home h into sink: the store through
// checkpoint (into a temporary directory beside the store, so that its
// tables are hard links, not copies), the databases held (by their paths
// in the home) through their snapshots, then every other file, and last
// the manifest.
func writeBackup(h Home, cfg config.Config, did string, live bool, checkpoint func(dest string) error, held map[string]boltsnap.Func, sink backupSink) (BackupManifest, error) {
	m := BackupManifest{DID: did, Taken: time.Now().UTC(), Live: live, StoreDir: backupStoreDir(cfg)}
	count := func(size int64) { m.Files++; m.Bytes += size }
	storeDir, err := filepath.Abs(h.Path(cfg.Store.Dir))
	if err != nil {
		return m, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(storeDir), ".fleetmesh-backup-")
	if err != nil {
		return m, fmt.Errorf("backup: a temporary directory beside the store: %w", err)
	}
	defer os.RemoveAll(tmp)
	cp := filepath.Join(tmp, "store")
	if err := checkpoint(cp); err != nil {
		return m, err
	}
	if err := copyTree(cp, m.StoreDir, nil, sink, count); err != nil {
		return m, err
	}
	names := make([]string, 0, len(held))
	for rel := range held {
		names = append(names, rel)
	}
	slices.Sort(names)
	for _, rel := range names {
		if err := sink.dir(path.Dir(rel)); err != nil {
			return m, err
		}
		err := held[rel](func(size int64, write func(io.Writer) error) error {
			count(size)
			return sink.file(rel, 0o600, size, write)
		})
		if err != nil {
			return m, fmt.Errorf("backup: %s: %w", rel, err)
		}
	}
	home, err := filepath.Abs(h.Dir)
	if err != nil {
		return m, err
	}
	skip := func(rel, abs string) bool {
		return slices.Contains(skipInHome, rel) || held[rel] != nil ||
			abs == storeDir || abs == tmp || strings.HasPrefix(filepath.Base(abs), ".fleetmesh-backup-")
	}
	if err := copyTree(home, "", skip, sink, count); err != nil {
		return m, err
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	data = append(data, '\n')
	err = sink.file(ManifestFile, 0o600, int64(len(data)), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	return m, err
}

// copyTree copies the directory root into sink under prefix, leaving out
// what skip (given the path under root, slash-separated, and the absolute
// path) says to. Regular files are copied as they are, except bbolt
// databases (*.db), which are copied in a read transaction so that a
// process writing them cannot tear the copy; sockets and other special
// files are left out.
func copyTree(root, prefix string, skip func(rel, abs string) bool, sink backupSink, count func(int64)) error {
	return filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			return err
		}
		if rel == "." {
			return sink.dir(prefix)
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel, abs) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		out := path.Join(prefix, rel)
		switch {
		case d.IsDir():
			return sink.dir(out)
		case !d.Type().IsRegular():
			return nil
		case strings.HasSuffix(abs, ".db"):
			return copyBolt(abs, out, sink, count)
		}
		f, err := os.Open(abs)
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		count(st.Size())
		return sink.file(out, st.Mode().Perm(), st.Size(), func(w io.Writer) error {
			_, err := io.CopyN(w, f, st.Size())
			return err
		})
	})
}

// boltTimeout is how long a backup waits for a bbolt database another
// process holds.
const boltTimeout = 2 * time.Second

// copyBolt copies a bbolt database in one read transaction.
func copyBolt(abs, out string, sink backupSink, count func(int64)) error {
	db, err := bolt.Open(abs, 0o600, &bolt.Options{ReadOnly: true, Timeout: boltTimeout})
	if err != nil {
		return fmt.Errorf("backup: %s: %w (a process holds it: stop it, or take the backup through the node that does)", abs, err)
	}
	defer db.Close()
	return boltsnap.Of(db)(func(size int64, write func(io.Writer) error) error {
		count(size)
		return sink.file(out, 0o600, size, write)
	})
}

// tarSink writes a backup as a tar stream.
type tarSink struct{ tw *tar.Writer }

func (s tarSink) dir(rel string) error {
	if rel == "" || rel == "." {
		return nil
	}
	return s.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o700})
}

func (s tarSink) file(rel string, mode fs.FileMode, size int64, write func(io.Writer) error) error {
	if err := s.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: int64(mode.Perm()), Size: size}); err != nil {
		return err
	}
	return write(s.tw)
}

// dirSink writes a backup into a directory.
type dirSink struct{ root string }

func (s dirSink) dir(rel string) error {
	return os.MkdirAll(filepath.Join(s.root, filepath.FromSlash(rel)), 0o700)
}

func (s dirSink) file(rel string, mode fs.FileMode, size int64, write func(io.Writer) error) error {
	f, err := os.OpenFile(filepath.Join(s.root, filepath.FromSlash(rel)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return err
	}
	cw := &countWriter{w: f}
	err = write(cw)
	if err == nil && cw.n != size {
		err = fmt.Errorf("backup: %s: wrote %d bytes, want %d", rel, cw.n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// maxBackupEntry bounds one file of a backup read from a tar stream (a
// store's tables are at most a few hundred MiB each).
const maxBackupEntry = 64 << 30

// extractBackup writes the tar stream r into the directory dest, which
// exists: only directories and regular files, at paths inside dest, none
// twice. It returns the manifest, which must come last.
func extractBackup(r io.Reader, dest string) (BackupManifest, error) {
	var m BackupManifest
	tr := tar.NewReader(r)
	sink := dirSink{root: dest}
	seen := map[string]bool{}
	manifest := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("backup: the stream broke off: %w", err)
		}
		if manifest {
			return m, fmt.Errorf("backup: %q after the manifest", hdr.Name)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if !fs.ValidPath(name) || name == "." || seen[name] {
			return m, fmt.Errorf("backup: the stream names %q: not a new path inside the backup", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			// A directory may come again (before a file in it, and in
			// the walk); a file may not.
			if err := sink.dir(name); err != nil {
				return m, err
			}
		case tar.TypeReg:
			seen[name] = true
			if hdr.Size < 0 || hdr.Size > maxBackupEntry {
				return m, fmt.Errorf("backup: %s: %d bytes", name, hdr.Size)
			}
			if err := sink.dir(path.Dir(name)); err != nil {
				return m, err
			}
			var data []byte
			if name == ManifestFile {
				manifest = true
				if data, err = io.ReadAll(io.LimitReader(tr, 1<<20)); err != nil {
					return m, fmt.Errorf("backup: the stream broke off: %w", err)
				}
				if err := json.Unmarshal(data, &m); err != nil {
					return m, fmt.Errorf("backup: the manifest is not JSON: %w", err)
				}
			}
			err := sink.file(name, fs.FileMode(hdr.Mode)&0o700, hdr.Size, func(w io.Writer) error {
				if data != nil {
					_, err := w.Write(data)
					return err
				}
				_, err := io.CopyN(w, tr, hdr.Size)
				return err
			})
			if err != nil {
				return m, fmt.Errorf("backup: %s: %w", name, err)
			}
		default:
			return m, fmt.Errorf("backup: the stream holds %q, which is neither a file nor a directory", hdr.Name)
		}
	}
	if !manifest {
		return m, errors.New("backup: the stream ended without its manifest: the node stopped before the backup was complete")
	}
	return m, nil
}

// serveBackup streams the node's backup to the holder of its RunFile's
// token, on loopback only.
func (n *Node) serveBackup(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST "+BackupPath+" takes a backup (fleetmesh backup --home DIR --out DIR)", http.StatusMethodNotAllowed)
		return
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() || r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" {
		http.Error(w, "a backup is served to loopback only: run fleetmesh backup on the node's host", http.StatusForbidden)
		return
	}
	if !n.hasRunToken(r) {
		http.Error(w, "a backup needs the token in the node home's "+RunFile+" (fleetmesh backup --home DIR reads it)", http.StatusUnauthorized)
		return
	}
	pebble, ok := n.store.(*store.Store)
	if !ok || n.didcomm == nil || n.listsFile == nil {
		http.Error(w, "this node's events are in PostgreSQL ([store] backend = 'postgres'): back the database up with pg_dump, and the node home (node.key, config.toml, accounting/, didcomm/) of the front-end holding the mesh role by copying it with the node stopped", http.StatusConflict)
		return
	}
	held := map[string]boltsnap.Func{
		path.Join(DIDCommDir, agent.SnapshotPath): n.didcomm.Snapshot,
	}
	if a := n.acct.s; a != nil {
		held[path.Join(AccountingDir, accounting.DBFile)] = a.Snapshot
	}
	held[manage.FileName] = n.listsFile.Snapshot
	w.Header().Set("Content-Type", "application/x-tar")
	tw := tar.NewWriter(w)
	m, err := writeBackup(n.opts.Home, n.opts.Config, n.opts.Key.DID(), true, pebble.Checkpoint, held, tarSink{tw})
	if err != nil {
		// The stream ends without its manifest, which the client reports.
		n.opts.Log.Error("backup failed", "err", err)
		return
	}
	if err := tw.Close(); err != nil {
		n.opts.Log.Warn("backup: the client went away", "err", err)
		return
	}
	n.opts.Log.Info("backup taken", "files", m.Files, "bytes", m.Bytes)
}

// Backup copies the node home h into out, a directory that must not exist
// yet, and returns what it holds. A node running on h takes it (Live in
// the manifest); with none running, Backup takes the home's lock, so none
// starts meanwhile, and reads the home itself, checkpointing the store
// without migrating it. A backup that fails leaves nothing at out.
func Backup(ctx context.Context, h Home, out string) (m BackupManifest, err error) {
	if _, err := os.Lstat(out); err == nil {
		return m, fmt.Errorf("backup: %s exists: give a new directory", out)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	if err := os.Mkdir(out, 0o700); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(out)
		}
	}()
	if _, err := os.Stat(h.KeyPath()); err != nil {
		return m, fmt.Errorf("backup: %s is not a node home (no %s): %w", h.Dir, KeyFile, err)
	}
	lock, err := lockHome(h)
	if errors.Is(err, ErrHomeInUse) {
		return fetchBackup(ctx, h, out)
	}
	if err != nil {
		return m, err
	}
	defer lock.release()
	cfg, err := config.Load(h.ConfigPath())
	if err != nil {
		return m, err
	}
	key, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		return m, fmt.Errorf("backup: %s is not a node home: %w", h.Dir, err)
	}
	storeDir := h.Path(cfg.Store.Dir)
	checkpoint := func(dest string) error {
		if _, err := os.Stat(storeDir); errors.Is(err, fs.ErrNotExist) {
			return os.Mkdir(dest, 0o700) // a home that never ran has no store yet
		}
		return store.CheckpointDir(storeDir, dest)
	}
	return writeBackup(h, cfg, key.DID(), false, checkpoint, nil, dirSink{root: out})
}

// fetchBackup asks the node running on h for its backup and writes it
// into out.
func fetchBackup(ctx context.Context, h Home, out string) (BackupManifest, error) {
	info, path, err := readRunInfo(h)
	if err != nil {
		return BackupManifest{}, fmt.Errorf("backup: a node holds %s but: %w", h.Dir, err)
	}
	url := strings.TrimSuffix(info.URL, StatusPath) + BackupPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return BackupManifest{}, fmt.Errorf("backup: %s names %q: %w", path, info.URL, err)
	}
	req.Header.Set("Authorization", "Bearer "+info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return BackupManifest{}, fmt.Errorf("backup: the node of %s (pid %d) does not answer at %s: %w", h.Dir, info.PID, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return BackupManifest{}, fmt.Errorf("backup: the node at %s answered %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return extractBackup(resp.Body, out)
}
