package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/internal/pgtest"
	"fleetmesh.org/fleetmesh/manage"
)

// frontLists is one front-end's view of the operator's lists and what
// their changes did there.
type frontLists struct {
	l      *manage.Lists
	mu     sync.Mutex
	info   [3]string
	closed []netip.Prefix
}

func openFrontLists(t *testing.T, s *Store, o manage.ListOptions) *frontLists {
	t.Helper()
	f := &frontLists{}
	o.SetInfo = func(n, d, i string) {
		f.mu.Lock()
		f.info = [3]string{n, d, i}
		f.mu.Unlock()
	}
	o.CloseClients = func(p netip.Prefix) int {
		f.mu.Lock()
		f.closed = append(f.closed, p)
		f.mu.Unlock()
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := manage.New(ctx, s.ManageLists(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f.l = l
	return f
}

// within waits until check returns nil, failing the test with its last
// error after a generous bound (the lists' poll is far shorter).
func within(t *testing.T, what string, check func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			t.Logf("%s: after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestManageListsShared runs the operator's lists of two front-ends over
// one database: a change made through either holds at the other, with its
// effects there (the NIP-11 fields shown, a blocked prefix's clients
// closed); the bound on a list holds across both; a change whose NOTIFY
// never comes is still seen, by the poll; and the lists survive every
// connection being ended (pg_terminate_backend).
func TestManageListsShared(t *testing.T) {
	url := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func() *Store {
		s, err := Open(ctx, url, Options{SweepEvery: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	sa, sb := open(), open()
	// A long poll at b: what reaches it quickly came by NOTIFY.
	lim := manage.Limits{MaxEntries: 3}
	// A short poll at a, even while its listener is connected: what
	// a change written without NOTIFY needs to be seen.
	a := openFrontLists(t, sa, manage.ListOptions{Limits: lim, Poll: 200 * time.Millisecond, PollListening: 200 * time.Millisecond})
	b := openFrontLists(t, sb, manage.ListOptions{Limits: lim, Poll: time.Hour})

	spammer := [32]byte{0xaa}
	if err := a.l.BanPubkey(ctx, spammer, "spam"); err != nil {
		t.Fatal(err)
	}
	within(t, "a ban made at a, refused at b", func() error {
		if r := b.l.PubkeyRefusal(spammer, true); !strings.HasPrefix(r, "blocked: ") || !strings.Contains(r, "spam") {
			return fmt.Errorf("b's refusal of the banned author: %q", r)
		}
		return nil
	})

	p, _ := manage.ParseAddr("192.0.2.0/24")
	if err := a.l.BlockIP(ctx, p, "flood"); err != nil {
		t.Fatal(err)
	}
	within(t, "a block made at a, enforced at b", func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.l.AddrRefusal(netip.MustParseAddr("192.0.2.9")) == "" || len(b.closed) != 1 || b.closed[0] != p {
			return fmt.Errorf("b refuses 192.0.2.9: %q; b closed the clients of %v", b.l.AddrRefusal(netip.MustParseAddr("192.0.2.9")), b.closed)
		}
		return nil
	})
	a.mu.Lock()
	if len(a.closed) != 1 {
		t.Errorf("a closed the clients of %v, want the blocked prefix once", a.closed)
	}
	a.mu.Unlock()

	if err := b.l.SetInfo(ctx, "name", "One relay"); err != nil {
		t.Fatal(err)
	}
	within(t, "a name set at b, shown at a", func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.info != [3]string{"One relay", "", ""} {
			return fmt.Errorf("a shows %q", a.info)
		}
		return nil
	})

	// The bound on a list counts every front-end's entries.
	if err := b.l.BanPubkey(ctx, [32]byte{0xbb}, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.l.BanPubkey(ctx, [32]byte{0xcc}, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.l.BanPubkey(ctx, [32]byte{0xdd}, ""); !errors.Is(err, manage.ErrFull) {
		t.Fatalf("a fourth ban with max_entries 3: %v, want ErrFull", err)
	}
	if err := b.l.BanPubkey(ctx, spammer, "spam again"); err != nil {
		t.Fatalf("banning again an author already banned, at the bound: %v", err)
	}

	// A change whose NOTIFY is lost: a is still told by its poll.
	if _, err := sb.pool.Exec(ctx, `WITH v AS (UPDATE fleetmesh.manage_head SET version = version + 1)
		DELETE FROM fleetmesh.manage_lists WHERE list = $1 AND key = $2`, manage.ListBannedPubkeys, fmt.Sprintf("%x", spammer)); err != nil {
		t.Fatal(err)
	}
	within(t, "a change made with no NOTIFY, seen at a by its poll", func() error {
		if r := a.l.PubkeyRefusal(spammer, true); r != "" {
			return fmt.Errorf("a still refuses the author: %q", r)
		}
		return nil
	})

	// Every connection ended: the next ban, once the pools have
	// reconnected, reaches b by its listener's new connection.
	if _, err := pgtest.Terminate(ctx, url); err != nil {
		t.Fatal(err)
	}
	within(t, "an unban made at a after its connections ended", func() error {
		_, err := a.l.UnbanPubkey(ctx, [32]byte{0xbb})
		return err
	})
	within(t, "an unban made at a after every connection ended, seen at b", func() error {
		if r := b.l.PubkeyRefusal([32]byte{0xbb}, true); r != "" {
			return fmt.Errorf("b still refuses the author: %q", r)
		}
		return nil
	})
}

// TestCopyListsFromFile copies a node's manage.db into the database, as
// `fleetmesh store migrate` does, and a front-end's lists then hold every
// entry.
func TestCopyListsFromFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fs, err := manage.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	src, err := manage.New(ctx, fs, manage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pk := [32]byte{1}
	p, _ := manage.ParseAddr("198.51.100.7")
	for _, err := range []error{
		src.BanPubkey(ctx, pk, "spam"),
		src.BlockIP(ctx, p, ""),
		src.DisallowKind(ctx, 4),
		src.SetInfo(ctx, "description", "moved"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctx, pgtest.Database(t), Options{SweepEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, err := manage.CopyLists(ctx, s.ManageLists(), fs)
	if err != nil || n != 4 {
		t.Fatalf("copied %d entries (%v), want 4", n, err)
	}
	dst := openFrontLists(t, s, manage.ListOptions{})
	if dst.l.PubkeyRefusal(pk, false) == "" || dst.l.AddrRefusal(p.Addr()) == "" || dst.l.KindRefusal(4) == "" {
		t.Fatal("a list entry was lost on the way to PostgreSQL")
	}
	if dst.info != [3]string{"", "moved", ""} {
		t.Fatalf("info after the copy: %q", dst.info)
	}
	// Run again: nothing doubles.
	if n, err := manage.CopyLists(ctx, s.ManageLists(), fs); err != nil || n != 4 {
		t.Fatalf("second copy: %d (%v)", n, err)
	}
	var rows int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM fleetmesh.manage_lists").Scan(&rows); err != nil || rows != 4 {
		t.Fatalf("%d rows after copying twice (%v), want 4", rows, err)
	}
}

// TestManageAuthUsedShared: a NIP-98 authorization taken at one front-end
// is refused at another, and forgotten once older than the window.
func TestManageAuthUsedShared(t *testing.T) {
	url := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ms []*ManageLists
	for range 2 {
		s, err := Open(ctx, url, Options{SweepEvery: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ms = append(ms, s.ManageLists())
	}
	now := time.Unix(1_800_000_000, 0)
	const window = time.Minute
	for _, tc := range []struct {
		name  string
		at    int
		id    byte
		made  time.Time
		now   time.Time
		fresh bool
	}{
		{"first use", 0, 1, now, now, true},
		{"again at the other front-end", 1, 1, now, now.Add(time.Second), false},
		{"again at the first", 0, 1, now, now.Add(2 * time.Second), false},
		{"another id", 1, 2, now, now.Add(3 * time.Second), true},
		{"a third id, later: the first two are forgotten", 0, 3, now.Add(2 * window), now.Add(2 * window), true},
	} {
		fresh, err := ms[tc.at].Use(ctx, [32]byte{tc.id}, tc.made, tc.now, window)
		if err != nil || fresh != tc.fresh {
			t.Fatalf("%s: fresh %v (%v), want %v", tc.name, fresh, err, tc.fresh)
		}
	}
	var rows int
	if err := ms[0].s.pool.QueryRow(ctx, "SELECT count(*) FROM fleetmesh.manage_auth_used").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d authorizations remembered (%v), want 1: the stale ones deleted", rows, err)
	}
}

// TestManageHoldShared: an event another front-end allowed is not queued
// for moderation again, even by a front-end whose view has not heard of
// the allow: the store's check, not the view's, decides.
func TestManageHoldShared(t *testing.T) {
	url := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, url, Options{SweepEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := openFrontLists(t, s, manage.ListOptions{Poll: time.Hour}).l
	id := [32]byte{7}
	// The allow is written with no version change and no NOTIFY, so a's
	// view never learns of it.
	if _, err := s.pool.Exec(ctx, "INSERT INTO fleetmesh.manage_lists (list, key, value) VALUES ($1, $2, '')",
		manage.ListAllowedEvents, fmt.Sprintf("%x", id)); err != nil {
		t.Fatal(err)
	}
	if err := a.Hold(ctx, id, []byte(`{}`), "labels: spam"); err != nil {
		t.Fatal(err)
	}
	held, err := a.Held(ctx)
	if err != nil || len(held) != 0 {
		t.Fatalf("an allowed event held again: the queue is %+v (%v), want empty", held, err)
	}
	if err := a.Hold(ctx, [32]byte{8}, []byte(`{}`), "labels: spam"); err != nil {
		t.Fatal(err)
	}
	if held, err = a.Held(ctx); err != nil || len(held) != 1 {
		t.Fatalf("another event held: the queue is %+v (%v), want it alone", held, err)
	}
	// What changes nothing does not move the version: the front-ends do
	// not reload for it.
	v, err := s.ManageLists().Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if found, err := a.UnbanEvent(ctx, [32]byte{9}); found || err != nil {
		t.Fatalf("unban of an event never banned: found %v (%v)", found, err)
	}
	if err := a.Hold(ctx, [32]byte{8}, []byte(`{}`), "again"); err != nil {
		t.Fatal(err)
	}
	if after, err := s.ManageLists().Version(ctx); err != nil || after != v {
		t.Fatalf("version %d after changing nothing (%v), was %d", after, err, v)
	}
}

// TestManageListsPollWhileListening: while the store's listener is
// connected, the lists read the version on notifications only and wait
// PollListening for anything else; a change written around the store
// (by hand, with no NOTIFY) is seen when the listener's connection drops
// and comes back, which wakes the watcher.
func TestManageListsPollWhileListening(t *testing.T) {
	url := pgtest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, url, Options{SweepEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a := openFrontLists(t, s, manage.ListOptions{Poll: 50 * time.Millisecond, PollListening: time.Hour})
	within(t, "the listener connected", func() error {
		if !s.ManageLists().Listening() {
			return errors.New("not listening")
		}
		return nil
	})
	// The listener wakes the watcher as it connects: let that read go by.
	time.Sleep(300 * time.Millisecond)
	// A ban written by hand, with no NOTIFY: Poll would read it within
	// 50 ms; while listening nothing does.
	spammer := [32]byte{0xaa}
	if _, err := s.pool.Exec(ctx, `WITH v AS (UPDATE fleetmesh.manage_head SET version = version + 1)
		INSERT INTO fleetmesh.manage_lists (list, key, value) VALUES ($1, $2, $3)`, manage.ListBannedPubkeys, fmt.Sprintf("%x", spammer), []byte("spam")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if r := a.l.PubkeyRefusal(spammer, true); r != "" {
		t.Fatalf("a ban written without NOTIFY was read within a second while the listener was connected: %q", r)
	}
	if _, err := pgtest.Terminate(ctx, url); err != nil {
		t.Fatal(err)
	}
	within(t, "the ban, after the listener's reconnection", func() error {
		if r := a.l.PubkeyRefusal(spammer, true); !strings.Contains(r, "spam") {
			return fmt.Errorf("the banned author's refusal: %q", r)
		}
		return nil
	})
}
