package frontend

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"fleetmesh.org/fleetmesh/internal/pgtest"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/pgstore"
	"fleetmesh.org/fleetmesh/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// terminate ends, from another session, the server sessions whose
// application_name starts with prefix, as an operator's
// pg_terminate_backend or a failover would; it returns how many.
func terminate(t *testing.T, url, prefix string) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE $1 || '%' AND pid <> pg_backend_pid()`, prefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRole: one front-end at a time holds the mesh role; when its session
// ends (pg_terminate_backend) it learns it has lost the role and another
// takes it, and the members table names the holder from the server's own
// lock table.
func TestRole(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	key := RoleLockKey("did:key:test")
	a, err := TryRole(ctx, url, key, "a")
	if err != nil || a == nil {
		t.Fatalf("first front-end: role %v, err %v; want the role", a, err)
	}
	b, err := TryRole(ctx, url, key, "b")
	if err != nil || b != nil {
		t.Fatalf("second front-end: role %v, err %v; want none while a holds it", b, err)
	}
	log := slog.New(slog.DiscardHandler)
	ma, err := Join(ctx, url, "did:key:test", key, Member{Name: "a", RelayURL: "ws://a"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()
	if err := ma.HoldsRole(ctx, a); err != nil {
		t.Fatal(err)
	}
	mb, err := Join(ctx, url, "did:key:test", key, Member{Name: "b", RelayURL: "ws://b"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	holders := func() map[string]bool {
		t.Helper()
		list, err := mb.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, m := range list {
			got[m.Name] = m.MeshRole
		}
		return got
	}
	if got := holders(); len(got) != 2 || !got["a"] || got["b"] {
		t.Fatalf("members %v, want a (holding the role) and b", got)
	}

	if n := terminate(t, url, RoleApplication("a")); n != 1 {
		t.Fatalf("terminated %d sessions of a's role, want 1", n)
	}
	select {
	case <-a.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("a did not learn that its session ended")
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err = WaitRole(wctx, url, key, "b", nil)
	if err != nil {
		t.Fatalf("b did not take the free role: %v", err)
	}
	if err := mb.HoldsRole(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := holders(); !got["b"] || got["a"] {
		t.Fatalf("members %v, want b holding the role, a not", got)
	}
	if err := a.Release(); err != nil {
		t.Logf("release of a lost role: %v", err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if got := holders(); got["a"] || got["b"] {
		t.Fatalf("members %v after b released the role, want no holder", got)
	}
}

// TestFollowerAcrossTerminatedConnections: a front-end's follower hands
// on every event another front-end stores, in commit order and each
// once, while the database ends its connections midway.
func TestFollowerAcrossTerminatedConnections(t *testing.T) {
	url := pgtest.Database(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	withName := func(name string) string {
		if strings.Contains(url, "?") {
			return url + "&application_name=" + name
		}
		return url + "?application_name=" + name
	}
	writer, err := pgstore.Open(ctx, withName("writer"), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	reader, err := pgstore.Open(ctx, withName("follower"), pgstore.Options{FeedPoll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	type got struct {
		id  [32]byte
		seq uint64
	}
	out := make(chan got, 1024)
	f, err := NewFollower(ctx, reader, func(ev *nostr.Event, seq uint64) { out <- got{ev.ID, seq} }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Run(ctx)
	}()
	k, _ := nostr.GenerateSecretKey()
	const total = 300
	want := map[[32]byte]bool{}
	for i := range total {
		ev := &nostr.Event{CreatedAt: time.Now().Unix(), Kind: 1, Tags: nostr.Tags{}, Content: "n" + string(rune('a'+i%26))}
		ev.Content += time.Now().String()
		if err := k.Sign(ev); err != nil {
			t.Fatal(err)
		}
		if _, err := writer.Save(ctx, ev); err != nil {
			t.Fatal(err)
		}
		want[ev.ID] = true
		if i == total/3 || i == 2*total/3 {
			if terminate(t, url, "follower") == 0 {
				t.Fatal("no follower session to terminate")
			}
		}
	}
	var last uint64
	deadline := time.After(60 * time.Second)
	for len(want) > 0 {
		select {
		case g := <-out:
			if g.seq <= last {
				t.Fatalf("position %d after %d: out of order or twice", g.seq, last)
			}
			last = g.seq
			if !want[g.id] {
				t.Fatalf("event %x delivered twice or never stored", g.id[:4])
			}
			delete(want, g.id)
		case <-deadline:
			t.Fatalf("%d of %d events never delivered", len(want), total)
		}
	}
	cancel()
	<-done
}

// TestCopyFromPebble copies a Pebble store into PostgreSQL: the database
// then answers as the Pebble store did, and a second run copies nothing
// new.
func TestCopyFromPebble(t *testing.T) {
	ctx := context.Background()
	src, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var keys []nostr.SecretKey
	for range 3 {
		k, _ := nostr.GenerateSecretKey()
		keys = append(keys, k)
	}
	base := time.Now().Unix() - 1000
	sign := func(k nostr.SecretKey, kind int, at int64, tags nostr.Tags) *nostr.Event {
		ev := &nostr.Event{CreatedAt: at, Kind: kind, Tags: tags, Content: "c"}
		if tags == nil {
			ev.Tags = nostr.Tags{}
		}
		if err := k.Sign(ev); err != nil {
			t.Fatal(err)
		}
		if _, err := src.Save(ctx, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for i := range 300 {
		sign(keys[i%3], 1, base+int64(i), nostr.Tags{{"t", "x"}})
	}
	for i := range 5 {
		sign(keys[0], 0, base+int64(i), nil) // one winner
	}
	doomed := sign(keys[1], 1, base+500, nil)
	sign(keys[1], 5, base+501, nostr.Tags{{"e", doomed.IDHex()}})

	dst, err := pgstore.Open(ctx, pgtest.Database(t), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	got, err := CopyFromPebble(ctx, src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Read != 302 || got.Results["stored"] != 302 {
		t.Fatalf("copied %+v, want 302 read and stored (300 notes, a profile, a deletion)", got)
	}
	all := func(q interface {
		Query(context.Context, *nostr.Filter, int, func(*nostr.Event) bool) error
	}) []string {
		var ids []string
		if err := q.Query(ctx, &nostr.Filter{}, 1000, func(ev *nostr.Event) bool { ids = append(ids, ev.IDHex()); return true }); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if a, b := all(src), all(dst); !slices.Equal(a, b) {
		t.Fatalf("PostgreSQL answers %d events, Pebble %d, or in another order", len(b), len(a))
	}
	again, err := CopyFromPebble(ctx, src, dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Results["duplicate"] != 302 {
		t.Fatalf("a second copy gave %+v, want 302 duplicates", again.Results)
	}
}

// TestSharedStanding: the standing view one front-end shares is what the
// others read, a read not newer than the last returns no scores, and a
// node that shared none reads as none.
func TestSharedStanding(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	join := func(did, name string) *Members {
		m, err := Join(ctx, url, did, RoleLockKey(did), Member{Name: name, RelayURL: "ws://" + name}, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	holder, other, stranger := join("did:key:a", "a1"), join("did:key:a", "a2"), join("did:key:b", "b1")
	if s, at, err := other.SharedStanding(ctx, time.Time{}); err != nil || s != nil || !at.IsZero() {
		t.Fatalf("before any share: %v at %v (err %v)", s, at, err)
	}
	want := map[string]float64{"did:key:x": 0.25, "did:key:y": 0.0005}
	if err := holder.ShareStanding(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, at, err := other.SharedStanding(ctx, time.Time{})
	if err != nil || len(got) != 2 || got["did:key:x"] != 0.25 || got["did:key:y"] != 0.0005 || at.IsZero() {
		t.Fatalf("read %v at %v (err %v), want %v", got, at, err, want)
	}
	if again, at2, err := other.SharedStanding(ctx, at); err != nil || again != nil || !at2.Equal(at) {
		t.Fatalf("a read not newer returned %v at %v (err %v)", again, at2, err)
	}
	if s, _, err := stranger.SharedStanding(ctx, time.Time{}); err != nil || s != nil {
		t.Fatalf("another node reads %v (err %v), want none", s, err)
	}
	if err := holder.ShareStanding(ctx, map[string]float64{}); err != nil {
		t.Fatal(err)
	}
	if s, at3, err := other.SharedStanding(ctx, at); err != nil || s == nil || len(s) != 0 || !at3.After(at) {
		t.Fatalf("after an empty share: %v at %v (err %v), want an empty view, newer", s, at3, err)
	}
}
