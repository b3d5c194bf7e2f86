package addrbook

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

func newPeerID(t testing.TB) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func addr(t testing.TB, s string) ma.Multiaddr {
	t.Helper()
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestObserveAddresses(t *testing.T) {
	self := newPeerID(t)
	other := newPeerID(t)
	tcp := "/ip4/127.0.0.1/tcp/4001"
	quic := "/ip4/127.0.0.1/udp/4001/quic-v1"
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"plain", []string{tcp}, []string{tcp}},
		{"newest first", []string{tcp, quic}, []string{quic, tcp}},
		{"own p2p suffix stripped", []string{tcp + "/p2p/" + self.String()}, []string{tcp}},
		{"other peer dropped", []string{tcp + "/p2p/" + other.String()}, nil},
		{"duplicates merged", []string{tcp, quic, tcp}, []string{tcp, quic}},
		{"bounded", []string{"/ip4/1.2.3.4/tcp/1", "/ip4/1.2.3.4/tcp/2", "/ip4/1.2.3.4/tcp/3"}, []string{"/ip4/1.2.3.4/tcp/3", "/ip4/1.2.3.4/tcp/2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Open(Config{MaxAddrsPerPeer: 2})
			if err != nil {
				t.Fatal(err)
			}
			var in []ma.Multiaddr
			for _, s := range tc.in {
				in = append(in, addr(t, s))
			}
			b.Observe(self, in, time.Unix(100, 0))
			got := b.Recent(0)
			if len(got) != 1 {
				t.Fatalf("got %d entries, want 1", len(got))
			}
			var gotS []string
			for _, a := range got[0].Addrs {
				gotS = append(gotS, a.String())
			}
			if fmt.Sprint(gotS) != fmt.Sprint(tc.want) {
				t.Fatalf("addrs = %v, want %v", gotS, tc.want)
			}
		})
	}
}

func TestEvictsLeastRecentlySeen(t *testing.T) {
	b, err := Open(Config{MaxPeers: 3})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]peer.ID, 5)
	for i := range ids {
		ids[i] = newPeerID(t)
	}
	a := addr(t, "/ip4/127.0.0.1/tcp/1")
	b.Observe(ids[0], []ma.Multiaddr{a}, time.Unix(10, 0))
	b.Observe(ids[1], []ma.Multiaddr{a}, time.Unix(20, 0))
	b.Observe(ids[2], []ma.Multiaddr{a}, time.Unix(30, 0))
	b.Observe(ids[0], nil, time.Unix(40, 0)) // 0 seen again: 1 is now oldest
	b.Observe(ids[3], []ma.Multiaddr{a}, time.Unix(50, 0))
	b.Observe(ids[0], nil, time.Unix(5, 0)) // never moves backwards
	got := b.Recent(0)
	want := []peer.ID{ids[3], ids[0], ids[2]}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i] {
			t.Fatalf("entry %d = %s, want %s", i, got[i].ID, want[i])
		}
	}
	if !got[1].Addrs[0].Equal(a) {
		t.Fatalf("observing with no addresses dropped the known ones: %v", got[1].Addrs)
	}
	if r := b.Recent(2); len(r) != 2 || r[0].ID != ids[3] {
		t.Fatalf("Recent(2) = %v", r)
	}
}

func TestSaveAndReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unchanged empty book was written: %v", err)
	}
	p1, p2 := newPeerID(t), newPeerID(t)
	b.Observe(p1, []ma.Multiaddr{addr(t, "/ip4/127.0.0.1/tcp/1"), addr(t, "/ip4/127.0.0.1/tcp/2")}, time.Unix(1000, 0))
	b.Observe(p2, []ma.Multiaddr{addr(t, "/ip6/::1/udp/3/quic-v1")}, time.Unix(2000, 0))
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("directory holds %d files after save, want only %s", len(entries), FileName)
	}
	b2, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	before, after := b.Recent(0), b2.Recent(0)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("reopened book differs:\n%v\n%v", before, after)
	}
}

func TestOpenRefusesBadFiles(t *testing.T) {
	id := newPeerID(t)
	tests := []struct {
		name string
		data string
	}{
		{"not json", "{"},
		{"wrong version", `{"version":2,"peers":[]}`},
		{"bad id", `{"version":1,"peers":[{"id":"nope","addrs":[],"last_seen":1}]}`},
		{"bad addr", `{"version":1,"peers":[{"id":"` + id.String() + `","addrs":["/ip4/300.0.0.1/tcp/1"],"last_seen":1}]}`},
		{"duplicate", `{"version":1,"peers":[{"id":"` + id.String() + `","addrs":[],"last_seen":1},{"id":"` + id.String() + `","addrs":[],"last_seen":2}]}`},
		{"negative time", `{"version":1,"peers":[{"id":"` + id.String() + `","addrs":[],"last_seen":-1}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, FileName), []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(Config{Dir: dir}); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Open = %v, want ErrMalformed", err)
			}
		})
	}
	t.Run("too big", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), make([]byte, 100), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(Config{Dir: dir, MaxFileBytes: 10}); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Open = %v, want ErrMalformed", err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	id := newPeerID(f)
	f.Add([]byte(`{"version":1,"peers":[]}`))
	f.Add([]byte(`{"version":1,"peers":[{"id":"` + id.String() + `","addrs":["/ip4/127.0.0.1/tcp/4001","/dns4/example.org/tcp/443/wss"],"last_seen":1700000000}]}`))
	f.Add([]byte(`{"version":1,"peers":[{"id":"x"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// What decodes must survive a round trip unchanged.
		again, err := Decode(Encode(entries))
		if err != nil {
			t.Fatalf("re-decoding encoded entries: %v", err)
		}
		if fmt.Sprint(again) != fmt.Sprint(entries) {
			t.Fatalf("round trip changed entries:\n%v\n%v", entries, again)
		}
	})
}

// TestNeverSeenPeersSurviveSaving covers peers known only from
// configuration or peer exchange: they have no last-seen time, and a saved
// book holding them must load again.
func TestNeverSeenPeersSurviveSaving(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	never, seen := newPeerID(t), newPeerID(t)
	b.Observe(never, []ma.Multiaddr{addr(t, "/ip4/127.0.0.1/tcp/1")}, time.Time{})
	b.Observe(seen, []ma.Multiaddr{addr(t, "/ip4/127.0.0.1/tcp/2")}, time.Unix(2000, 0))
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	b2, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("a saved book with a never-seen peer does not load: %v", err)
	}
	if before, after := fmt.Sprint(b.Recent(0)), fmt.Sprint(b2.Recent(0)); before != after {
		t.Fatalf("reopened book differs:\n%v\n%v", before, after)
	}
}
