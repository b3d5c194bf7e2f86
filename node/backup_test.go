package node

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tarOf builds a tar stream of entries: a name ending in / is a
// directory, "link:" makes a symlink, anything else a file of its content.
func tarOf(t testing.TB, entries ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		name, body := e[0], e[1]
		h := &tar.Header{Name: name, Mode: 0o600, Typeflag: tar.TypeReg, Size: int64(len(body))}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o700
		case strings.HasPrefix(body, "link:"):
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, strings.TrimPrefix(body, "link:")
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	return b.Bytes()
}

const manifestJSON = `{"did":"did:key:z6Mk","store_dir":"data","files":1,"bytes":3}`

func TestExtractBackup(t *testing.T) {
	dest := t.TempDir()
	m, err := extractBackup(bytes.NewReader(tarOf(t,
		[2]string{"data/", ""}, [2]string{"data/000001.sst", "abc"},
		[2]string{"didcomm/mediator/", ""}, [2]string{"didcomm/", ""}, // directories may come again
		[2]string{"node.key", "key"}, [2]string{ManifestFile, manifestJSON})), dest)
	if err != nil || m.DID != "did:key:z6Mk" || m.StoreDir != "data" {
		t.Fatalf("extract: %+v %v", m, err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "data", "000001.sst")); err != nil || string(b) != "abc" {
		t.Fatalf("data/000001.sst: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, ManifestFile)); string(b) != manifestJSON {
		t.Fatalf("the manifest was written as %q", b)
	}
	if st, err := os.Stat(filepath.Join(dest, "node.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("node.key: %v %v", st, err)
	}

	for _, tc := range []struct {
		name    string
		entries [][2]string
		want    string
	}{
		{"outside", [][2]string{{"../evil", "x"}, {ManifestFile, manifestJSON}}, "not a new path"},
		{"absolute", [][2]string{{"/etc/evil", "x"}, {ManifestFile, manifestJSON}}, "not a new path"},
		{"symlink", [][2]string{{"data", "link:/etc"}, {ManifestFile, manifestJSON}}, "neither a file nor a directory"},
		{"a file twice", [][2]string{{"node.key", "a"}, {"node.key", "b"}, {ManifestFile, manifestJSON}}, "not a new path"},
		{"no manifest", [][2]string{{"node.key", "a"}}, "without its manifest"},
		{"after the manifest", [][2]string{{ManifestFile, manifestJSON}, {"node.key", "a"}}, "after the manifest"},
		{"a manifest that is not JSON", [][2]string{{ManifestFile, "{"}}, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := t.TempDir()
			_, err := extractBackup(bytes.NewReader(tarOf(t, tc.entries...)), dest)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(dest), "evil")); err == nil {
				t.Fatal("a file was written outside the backup")
			}
		})
	}
}

// FuzzExtractBackup: whatever the stream, extraction writes only
// directories and regular files, and only inside the backup.
func FuzzExtractBackup(f *testing.F) {
	f.Add(tarOf(f, [2]string{"data/", ""}, [2]string{"data/x", "abc"}, [2]string{ManifestFile, manifestJSON}))
	f.Add(tarOf(f, [2]string{"../x", "a"}))
	f.Add(tarOf(f, [2]string{"a", "link:/"}))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "backup")
		if err := os.Mkdir(dest, 0o700); err != nil {
			t.Fatal(err)
		}
		extractBackup(bytes.NewReader(data), dest)
		filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if p != parent && p != dest && !strings.HasPrefix(p, dest+string(filepath.Separator)) {
				t.Fatalf("%s written outside the backup", p)
			}
			if !d.IsDir() && !d.Type().IsRegular() {
				t.Fatalf("%s is neither a file nor a directory", p)
			}
			return nil
		})
	})
}
