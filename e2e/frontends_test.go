package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"fleetmesh.org/fleetmesh/frontend"
	"fleetmesh.org/fleetmesh/internal/pgtest"
)

// The front-end tests run three `fleetmesh run` processes of one node over
// one PostgreSQL database (issue 29): each has its own copy of one node
// home (the same key and config.toml, as on three machines) and its own
// relay port. The server is Debian's PostgreSQL, started by the test on
// loopback (internal/pgtest); scripts/test.sh installs it.

// frontEndsDB starts a PostgreSQL server for the test and returns the URL
// of a fresh database on it.
func frontEndsDB(t *testing.T) string {
	t.Helper()
	return newDatabase(t, startPostgres(t, "the front-end tests (scripts/test.sh installs postgresql)"))
}

// startPostgres starts a PostgreSQL server for the test, stopped when it
// ends; what names the test's use of it in the error.
func startPostgres(t *testing.T, what string) *pgtest.Server {
	t.Helper()
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatalf("PostgreSQL for %s: %v", what, err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv
}

// newDatabase creates a fresh database on srv and returns its URL.
func newDatabase(t *testing.T, srv *pgtest.Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// pgConnect opens a connection of the test's own to url; the caller
// closes it.
func pgConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// frontEndHomes makes a node home whose store is the database at url, its
// relay's limits opened for load, with extra appended to its config, and
// copies of it for the other front-ends: n homes with one key and one
// config.toml.
func frontEndHomes(t *testing.T, url string, n int, extra string) []string {
	t.Helper()
	config := nodeConfig(map[string]string{"max_limit": "100000", "ip_max_subscriptions": "1000", "max_subscriptions": "1000", "max_connections_per_ip": "1000",
		"req_ms_per_second": "1000000", "ip_req_ms_per_second": "1000000", "req_rows_per_second": "100000000", "ip_req_rows_per_second": "100000000"})
	config = strings.Replace(config, "[store]\ndir = \"data\"\n", fmt.Sprintf("[store]\nbackend = 'postgres'\npostgres_url = '%s'\n", url), 1)
	config += extra
	first := newHome(t, config)
	homes := []string{first}
	for i := 1; i < n; i++ {
		dir := filepath.Join(t.TempDir(), "home")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"node.key", "config.toml"} {
			data, err := os.ReadFile(filepath.Join(first, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		homes = append(homes, dir)
	}
	return homes
}

// freeAddr is a loopback address no one listens on now. A front-end keeps
// its relay address when it reopens to take the mesh role, so it is given
// a fixed one.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startFrontEnd runs `fleetmesh run` of home on a fixed relay address and
// any free mesh port.
func startFrontEnd(t *testing.T, home string) *node {
	t.Helper()
	addr := freeAddr(t)
	n, err := tryStartNode(t, home, addr, "--mesh-listen", "/ip4/127.0.0.1/tcp/0")
	if err != nil {
		t.Fatal(err)
	}
	n.url = "ws://" + addr
	return n
}

// meshRoleHolder is the index of the home whose front-end says it holds
// the mesh role (`fleetmesh status`).
func meshRoleHolder(t *testing.T, homes []string) int {
	t.Helper()
	holder := -1
	for i, h := range homes {
		st, err := statusOf(t, h)
		if err != nil {
			t.Fatal(err)
		}
		if st.MeshRole {
			holder = i
		}
	}
	if holder < 0 {
		t.Fatal("no front-end holds the mesh role")
	}
	return holder
}

// frontEndStatus is what `fleetmesh status --json` says of the front-ends.
type frontEndStatus struct {
	PeerID    string `json:"peer_id"`
	MeshRole  bool   `json:"mesh_role"`
	Peers     int    `json:"peers"`
	FrontEnds []struct {
		Name     string `json:"name"`
		RelayURL string `json:"relay_url"`
		MeshRole bool   `json:"mesh_role"`
	} `json:"front_ends"`
}

func statusOf(t *testing.T, home string) (frontEndStatus, error) {
	t.Helper()
	out, errOut, err := cli(t, "status", "--home", home, "--json")
	var st frontEndStatus
	if err != nil {
		return st, fmt.Errorf("fleetmesh status: %v: %s", err, errOut)
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// liveSub is one subscription opened on a connection, past its EOSE.
type liveSub struct {
	id string
	// got counts each event by its index in the test's id table: 1 once
	// delivered, more if delivered twice.
	got []atomic.Int32
}

// subConn is a connection holding several live subscriptions and the
// goroutine reading them.
type subConn struct {
	c    *websocket.Conn
	subs map[string]*liveSub
	// unknown counts events whose id the table does not hold; counts
	// the COUNT answers read.
	unknown atomic.Int64
	counts  atomic.Int64
	done    chan struct{}
	err     error
}

// openSubs opens count subscriptions of filter on c, waits for each EOSE
// and then reads events until c closes, looking each id up in index.
func openSubs(t *testing.T, c *websocket.Conn, prefix string, count int, filter map[string]any, index map[[32]byte]int, total int) *subConn {
	t.Helper()
	sc := &subConn{c: c, subs: map[string]*liveSub{}, done: make(chan struct{})}
	for i := range count {
		id := fmt.Sprintf("%s-%d", prefix, i)
		sc.subs[id] = &liveSub{id: id, got: make([]atomic.Int32, total)}
		req, _ := json.Marshal([]any{"REQ", id, filter})
		if err := c.WriteMessage(websocket.TextMessage, req); err != nil {
			t.Fatal(err)
		}
	}
	eosed := 0
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for eosed < count {
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for EOSE: %v", err)
		}
		if bytes.HasPrefix(data, []byte(`["EOSE",`)) {
			eosed++
		} else if !bytes.HasPrefix(data, []byte(`["NOTICE"`)) && !bytes.HasPrefix(data, []byte(`["AUTH"`)) {
			t.Fatalf("before any event was published, subscription got %s", data)
		}
	}
	c.SetReadDeadline(time.Time{})
	go func() {
		// Owned by the test: ends when c is closed.
		defer close(sc.done)
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				sc.err = err
				return
			}
			sub, id, ok := eventFrame(data)
			if !ok {
				if bytes.HasPrefix(data, []byte(`["COUNT",`)) {
					sc.counts.Add(1)
				}
				continue
			}
			s := sc.subs[sub]
			i, known := index[id]
			if s == nil || !known {
				sc.unknown.Add(1)
				continue
			}
			s.got[i].Add(1)
		}
	}()
	return sc
}

// eventFrame reads the subscription id and event id of an
// ["EVENT","sub",{"id":"…",…}] frame without decoding the whole event:
// three hundred subscriptions of ten thousand events are three million
// frames.
func eventFrame(data []byte) (sub string, id [32]byte, ok bool) {
	rest, found := bytes.CutPrefix(data, []byte(`["EVENT","`))
	if !found {
		return "", id, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "", id, false
	}
	sub = string(rest[:end])
	at := bytes.Index(rest, []byte(`"id":"`))
	if at < 0 || len(rest) < at+6+64 {
		return "", id, false
	}
	if _, err := hex.Decode(id[:], rest[at+6:at+6+64]); err != nil {
		return "", id, false
	}
	return sub, id, true
}

// publishAll publishes evs, spread over the urls, from conns connections
// to each, and fails the test on any refusal.
func publishAll(t *testing.T, urls []string, conns int, evs []*event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(urls)*conns)
	for _, u := range urls {
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := dial(ctx, u)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(evs) {
						return
					}
					ok, err := publishOne(c, evs[i])
					if err != nil || !ok.Accepted {
						errs <- fmt.Errorf("publish at %s: %+v %v", u, ok, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// signMany signs n kind-1 events tagged tag by a few authors and returns
// them with their index by id.
func signMany(t *testing.T, n int, tag string) ([]*event, map[[32]byte]int) {
	t.Helper()
	var authors []*user
	for range 8 {
		u, err := newUser()
		if err != nil {
			t.Fatal(err)
		}
		authors = append(authors, u)
	}
	evs := make([]*event, n)
	var wg sync.WaitGroup
	errs := make(chan error, len(authors))
	for a, u := range authors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := a; i < n; i += len(authors) {
				ev, err := u.sign(1, fmt.Sprintf("fe %d %s", i, tag), [][]string{{"t", tag}})
				if err != nil {
					errs <- err
					return
				}
				evs[i] = ev
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	index := make(map[[32]byte]int, n)
	for i, ev := range evs {
		var id [32]byte
		hex.Decode(id[:], []byte(ev.ID))
		index[id] = i
	}
	return evs, index
}

// frontEndsFull runs TestFrontEnds's live delivery at the full
// size, 10,000 events to 300 subscriptions, also under -race, where by
// default it sends 2,000 (signing and reading three million frames in a
// race-instrumented test takes minutes). Without -race the full size is
// the default.
var frontEndsFull = flag.Bool("frontends.full", false, "TestFrontEnds: 10,000 events to 300 subscriptions under -race too")

// TestFrontEnds runs three front-ends of one node over one database.
func TestFrontEnds(t *testing.T) {
	needBinary(t)
	url := frontEndsDB(t)
	homes := frontEndHomes(t, url, 3, meshConfig)
	var fes []*node
	for _, h := range homes {
		fes = append(fes, startFrontEnd(t, h))
	}
	urls := []string{fes[0].url, fes[1].url, fes[2].url}

	// The status of any front-end lists the three and one holder of the
	// mesh role.
	t.Run("status", func(t *testing.T) {
		st, err := statusOf(t, homes[2])
		if err != nil {
			t.Fatal(err)
		}
		holders := 0
		for _, f := range st.FrontEnds {
			if f.MeshRole {
				holders++
			}
		}
		if len(st.FrontEnds) != 3 || holders != 1 {
			t.Fatalf("status lists %d front-ends with %d holding the mesh role, want 3 and 1: %+v", len(st.FrontEnds), holders, st.FrontEnds)
		}
	})

	// Ten thousand events published through all three reach each of 300
	// live subscriptions spread over the three, every one once.
	t.Run("live everywhere", func(t *testing.T) {
		// One subscription per connection: a connection's send queue
		// holds 256 frames, which a race-instrumented reader on a busy
		// machine may let fill when one connection carries many.
		const perFrontEnd, connsPerFrontEnd = 100, 100
		total := 10000
		if raceEnabled && !*frontEndsFull {
			total = 2000
		}
		tag := randomContent("live")[5:]
		evs, index := signMany(t, total, tag)
		filter := map[string]any{"kinds": []int{1}, "#t": []string{tag}}
		var conns []*subConn
		for f, u := range urls {
			for c := range connsPerFrontEnd {
				ws, err := dial(context.Background(), u)
				if err != nil {
					t.Fatal(err)
				}
				defer ws.Close()
				conns = append(conns, openSubs(t, ws, fmt.Sprintf("f%dc%d", f, c), perFrontEnd/connsPerFrontEnd, filter, index, total))
			}
		}
		publishAll(t, urls, 3, evs)
		subs := 0
		deadline := time.Now().Add(2 * time.Minute)
		for _, sc := range conns {
			for _, s := range sc.subs {
				subs++
				for i := range s.got {
					for s.got[i].Load() == 0 && time.Now().Before(deadline) {
						select {
						case <-sc.done:
							t.Fatalf("subscription %s's connection closed: %v\n%s\n%s\n%s", s.id, sc.err, fes[0].output(), fes[1].output(), fes[2].output())
						case <-time.After(20 * time.Millisecond):
						}
					}
					if s.got[i].Load() == 0 {
						t.Fatalf("subscription %s never got event %d of %d", s.id, i, total)
					}
				}
			}
		}
		// Nothing arrives twice: checked once every event has arrived
		// everywhere and a further round trip (a COUNT) has been answered
		// on every connection.
		for _, sc := range conns {
			ping, _ := json.Marshal([]any{"COUNT", "after", filter})
			if err := sc.c.WriteMessage(websocket.TextMessage, ping); err != nil {
				t.Fatal(err)
			}
		}
		for _, sc := range conns {
			for sc.counts.Load() == 0 {
				select {
				case <-sc.done:
					t.Fatalf("connection closed before its COUNT was answered: %v", sc.err)
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		for _, sc := range conns {
			if n := sc.unknown.Load(); n > 0 {
				t.Fatalf("%d events not published by the test reached a subscription", n)
			}
			for _, s := range sc.subs {
				for i := range s.got {
					if n := s.got[i].Load(); n != 1 {
						t.Fatalf("subscription %s got event %d %d times", s.id, i, n)
					}
				}
			}
		}
		t.Logf("%d events reached each of %d subscriptions over three front-ends once", total, subs)
	})

	// A REQ opened while events are being written through the other two
	// sees every one of them exactly once, stored or live.
	t.Run("req while writing", func(t *testing.T) {
		const total = 1000
		tag := randomContent("req")[4:]
		evs, index := signMany(t, total, tag)
		published := make(chan struct{})
		go func() {
			defer close(published)
			publishAll(t, urls[:2], 2, evs)
		}()
		// Open the REQ once about a third is written.
		for {
			got, err := query(context.Background(), urls[2], map[string]any{"kinds": []int{1}, "#t": []string{tag}, "limit": 100000})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) >= total/3 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		ws, err := dial(context.Background(), urls[2])
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		req, _ := json.Marshal([]any{"REQ", "w", map[string]any{"kinds": []int{1}, "#t": []string{tag}, "limit": 100000}})
		if err := ws.WriteMessage(websocket.TextMessage, req); err != nil {
			t.Fatal(err)
		}
		counts := make([]int, total)
		seen, stored := 0, -1
		ws.SetReadDeadline(time.Now().Add(2 * time.Minute))
		for seen < total {
			_, data, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("after %d of %d events: %v", seen, total, err)
			}
			if bytes.HasPrefix(data, []byte(`["EOSE","w"]`)) {
				stored = seen
				continue
			}
			_, id, ok := eventFrame(data)
			if !ok {
				continue
			}
			i, known := index[id]
			if !known {
				t.Fatalf("unknown event %x", id[:4])
			}
			counts[i]++
			if counts[i] > 1 {
				t.Fatalf("event %d reached the subscription twice (stored part %d events)", i, stored)
			}
			seen++
		}
		<-published
		if stored < 0 {
			t.Fatal("no EOSE")
		}
		t.Logf("%d events: %d in the stored part, the rest live, each once", total, stored)
	})

	// Concurrent versions of one replaceable event through all three
	// leave one winner, the same at each; a deletion at one is honoured
	// at the others.
	t.Run("replaceable and deletion", func(t *testing.T) {
		u, err := newUser()
		if err != nil {
			t.Fatal(err)
		}
		base := time.Now().Unix() - 100
		var evs []*event
		for i := range 60 {
			ev, err := u.signAt(base+int64(i%20), 0, fmt.Sprintf("profile %d", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		var wg sync.WaitGroup
		for f, url := range urls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := dial(context.Background(), url)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				for i := f; i < len(evs); i += 3 {
					if _, err := publishOne(c, evs[i]); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		// The winner is the newest; among equals, the lowest id (NIP-01).
		var want *event
		for _, ev := range evs {
			if want == nil || ev.CreatedAt > want.CreatedAt || (ev.CreatedAt == want.CreatedAt && ev.ID < want.ID) {
				want = ev
			}
		}
		// A REQ's answer may hold, live, an older version a lagging
		// front-end's feed is still delivering: each front-end is asked
		// until its answer settles, and must settle on the one winner.
		for _, fe := range urls {
			eventually(t, func() error {
				got, err := query(context.Background(), fe, map[string]any{"kinds": []int{0}, "authors": []string{u.pubHex}})
				if err != nil {
					return err
				}
				if len(got) != 1 || got[0].ID != want.ID {
					return fmt.Errorf("%s serves %d versions (%v), want only %s", fe, len(got), got, want.ID)
				}
				return nil
			})
		}

		note, err := u.sign(1, randomContent("doomed"), nil)
		if err != nil {
			t.Fatal(err)
		}
		deletion, err := u.sign(5, "", [][]string{{"e", note.ID}})
		if err != nil {
			t.Fatal(err)
		}
		for i, step := range []struct {
			at string
			ev *event
		}{{urls[0], note}, {urls[1], deletion}} {
			c, err := dial(context.Background(), step.at)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := publishOne(c, step.ev)
			c.Close()
			if err != nil || !ok.Accepted {
				t.Fatalf("step %d: %+v %v", i, ok, err)
			}
		}
		for _, fe := range urls {
			eventually(t, func() error {
				got, err := query(context.Background(), fe, map[string]any{"ids": []string{note.ID}})
				if err != nil {
					return err
				}
				if len(got) != 0 {
					return fmt.Errorf("%s still serves the event deleted at %s", fe, urls[1])
				}
				return nil
			})
		}
		c, err := dial(context.Background(), urls[2])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if ok, err := publishOne(c, note); err != nil {
			t.Fatal(err)
		} else if got, _ := query(context.Background(), urls[0], map[string]any{"ids": []string{note.ID}}); len(got) != 0 {
			t.Fatalf("the deleted event published again at %s is served (OK %+v)", urls[2], ok)
		}
	})

	// The database ends one front-end's sessions: its live subscription
	// still gets every event published elsewhere meanwhile, once.
	t.Run("connections terminated", func(t *testing.T) {
		const total = 300
		tag := randomContent("term")[5:]
		evs, index := signMany(t, total, tag)
		ws, err := dial(context.Background(), urls[1])
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		sc := openSubs(t, ws, "t", 1, map[string]any{"kinds": []int{1}, "#t": []string{tag}}, index, total)
		// The application_name a front-end's store sessions carry.
		host, _ := os.Hostname()
		name := "fleetmesh " + host + "/" + strings.TrimPrefix(urls[1], "ws://")
		publishAll(t, urls[:1], 1, evs[:total/3])
		if n := terminateSessions(t, url, name); n == 0 {
			t.Fatalf("no session named %q to terminate", name)
		}
		publishAll(t, urls[:1], 1, evs[total/3:2*total/3])
		terminateSessions(t, url, name)
		publishAll(t, urls[:1], 1, evs[2*total/3:])
		s := sc.subs["t-0"]
		deadline := time.Now().Add(time.Minute)
		for i := range s.got {
			for s.got[i].Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := s.got[i].Load(); n != 1 {
				t.Fatalf("after its sessions were terminated twice, the front-end delivered event %d %d times\n%s", i, n, fes[1].output())
			}
		}
	})

	// kill -9 of a front-end without the mesh role: the others go on.
	t.Run("kill one", func(t *testing.T) {
		victim := -1
		for i, h := range homes {
			if st, err := statusOf(t, h); err == nil && !st.MeshRole {
				victim = i
				break
			}
		}
		if victim < 0 {
			t.Fatal("no front-end without the mesh role")
		}
		fes[victim].kill()
		var alive []string
		for i, u := range urls {
			if i != victim {
				alive = append(alive, u)
			}
		}
		tag := randomContent("after")[6:]
		evs, index := signMany(t, 50, tag)
		ws, err := dial(context.Background(), alive[1])
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		sc := openSubs(t, ws, "k", 1, map[string]any{"kinds": []int{1}, "#t": []string{tag}}, index, len(evs))
		publishAll(t, alive[:1], 1, evs)
		s := sc.subs["k-0"]
		deadline := time.Now().Add(time.Minute)
		for i := range s.got {
			for s.got[i].Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if s.got[i].Load() != 1 {
				t.Fatalf("with one front-end killed, event %d reached a subscription at another %d times", i, s.got[i].Load())
			}
		}
	})
}

// eventually calls check until it returns nil, failing the test with its
// last error after a minute.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// terminateSessions ends the database sessions whose application_name is
// name, as pg_terminate_backend by an operator or a failover would, and
// returns how many it ended.
func terminateSessions(t *testing.T, url, name string) int {
	t.Helper()
	c := pgConnect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFrontEndMeshRoleTakeover: kill -9 of the front-end holding the mesh
// role; another holds it within two of its asks for the lock after the
// lock is free (issue 29's "within 10 s", in the code's own intervals:
// two frontend.RolePoll), and a Pebble node meshed with the node sees the
// same node again: an event published at a front-end reaches it over the
// mesh.
func TestFrontEndMeshRoleTakeover(t *testing.T) {
	needBinary(t)
	peer := startMeshNode(t, newHome(t, nodeConfig(nil)+meshConfig))
	url := frontEndsDB(t)
	homes := frontEndHomes(t, url, 2, meshConfig+fmt.Sprintf("bootstrap = ['%s']\n", peer.mesh))
	fes := []*node{startFrontEnd(t, homes[0]), startFrontEnd(t, homes[1])}
	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	reachesPeer := func(at *node, what string) {
		t.Helper()
		id := publishAt(t, &meshNode{node: at}, u, randomContent(what))
		waitEverywhere(t, what, []*meshNode{peer}, []string{id})
	}
	// The front-end without the role publishes: the holder carries it to
	// the mesh.
	holder := meshRoleHolder(t, homes)
	other := 1 - holder
	reachesPeer(fes[other], "before")

	// The bound, another front-end holding the role within 10 s
	// of the kill, is the code's: the holder's session ends with its
	// process, which frees the lock, and the waiting front-end takes it
	// at its next ask (frontend.WaitRole asks every frontend.RolePoll on
	// one session). So the test counts the waiter's asks on the server
	// from the moment the lock is free, not seconds: the role must be
	// taken within two asks (one, and one more for an ask that was under
	// way as the lock freed), and two asks must fit in the 10 s.
	// The wall time is logged (docs/benchmarks/scale-out.md).
	if 2*frontend.RolePoll > 10*time.Second {
		t.Fatalf("frontend.RolePoll is %v: two asks no longer fit in issue 29's 10 s takeover", frontend.RolePoll)
	}
	watch := newRoleWatch(t, url, runID(t, homes[0]).DID, frontend.RoleApplication(frontend.Name(strings.TrimPrefix(fes[other].url, "ws://"))))
	old := watch.holder()
	if old == 0 {
		t.Fatal("the database shows no session holding the mesh role")
	}
	fes[holder].kill()
	killed := time.Now()
	asks, freed := watch.untilTaken(old)
	t.Logf("the mesh role moved %s after kill -9 (%s after the lock was seen free), the waiting front-end's asks since: %d",
		time.Since(killed).Round(100*time.Millisecond), time.Since(freed).Round(100*time.Millisecond), asks)
	if asks > 2 {
		t.Fatalf("the waiting front-end asked %d times after the lock was free before it held the role; want at most 2\n%s", asks, fes[other].output())
	}
	// `fleetmesh status` says the same, from the same lock table.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := statusOf(t, homes[other])
		if err == nil && st.MeshRole {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database shows the role taken, but fleetmesh status of the other front-end does not (status err %v)\n%s", err, fes[other].output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	reachesPeer(fes[other], "after")
}

// roleWatch reads, on a connection of the test's own, which session
// holds a node's mesh role lock and when a front-end's role session last
// asked for it.
type roleWatch struct {
	t      *testing.T
	c      *pgx.Conn
	key    int64
	waiter string // the waiting front-end's role session application_name
}

func newRoleWatch(t *testing.T, url, did, waiter string) *roleWatch {
	t.Helper()
	c := pgConnect(t, url)
	t.Cleanup(func() { c.Close(context.Background()) })
	return &roleWatch{t: t, c: c, key: frontend.RoleLockKey(did), waiter: waiter}
}

// holder is the backend pid of the session holding the lock, 0 if none
// (pg_locks shows a bigint advisory lock as its high and low 32 bits with
// objsubid 1).
func (w *roleWatch) holder() int32 {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pid int32
	err := w.c.QueryRow(ctx, `SELECT l.pid FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		AND l.classid = (($1::bigint >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid`, w.key).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return pid
}

// lastAsk is the pid of the waiter's role session and the start of the
// last query on it, that is, of its last ask for the lock.
func (w *roleWatch) lastAsk() (int32, time.Time) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pid int32
	var at time.Time
	err := w.c.QueryRow(ctx, `SELECT pid, coalesce(query_start, backend_start) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1 ORDER BY backend_start DESC LIMIT 1`, w.waiter).Scan(&pid, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, time.Time{}
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return pid, at
}

// untilTaken waits until the waiter's role session holds the lock that
// the session old held, and returns how many asks the waiter began after
// the test first saw the lock free, and when it saw that. Asks are told
// apart by their start on the server; a poll that comes late can only
// miss asks, never count one too many.
func (w *roleWatch) untilTaken(old int32) (asks int, freed time.Time) {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var seen time.Time
	for {
		h := w.holder()
		pid, at := w.lastAsk()
		if h != old && freed.IsZero() {
			freed, seen = time.Now(), at
		} else if !freed.IsZero() && !at.Equal(seen) {
			asks++
			seen = at
		}
		if h != 0 && h != old && h == pid {
			return asks, freed
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("60 s after kill -9 of the holder, the lock is held by pid %d (was %d) and the waiting front-end's role session is pid %d", h, old, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFrontEndsBehindNginx runs deploy/nginx-frontends.conf, with a test
// certificate and addresses, in front of two front-ends over one
// PostgreSQL configured as deploy/frontend.toml says: a client over wss://
// gets live an event published directly at each front-end, and /didcomm
// reaches the front-end holding the mesh role whichever one nginx tries
// first.
func TestFrontEndsBehindNginx(t *testing.T) {
	needBinary(t)
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Fatal("nginx is missing (apt-get install nginx-light; scripts/test.sh does)")
	}
	frontToml, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", "frontend.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"backend = 'postgres'", "trusted_proxies = ['10.0.0.10/32']"} {
		if !bytes.Contains(frontToml, []byte(key)) {
			t.Fatalf("deploy/frontend.toml no longer has %q: update this test with it", key)
		}
	}
	url := frontEndsDB(t)
	homes := frontEndHomes(t, url, 2, "")
	for _, h := range homes {
		path := filepath.Join(h, "config.toml")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// As deploy/frontend.toml, with the test's proxy on loopback.
		data = bytes.Replace(data, []byte("[relay]\n"), []byte("[relay]\ntrusted_proxies = ['127.0.0.1/32']\n"), 1)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fes := []*node{startFrontEnd(t, homes[0]), startFrontEnd(t, homes[1])}

	dir := t.TempDir()
	certFile, keyFile, certPEM := writeSelfSignedCert(t, dir)
	tlsAddr := gwFreeAddr(t)
	site := nginxSite(t, "nginx-frontends.conf", tlsAddr, certFile, keyFile,
		[2]string{"server 10.0.0.11:7447", "server " + strings.TrimPrefix(fes[0].url, "ws://")},
		[2]string{"server 10.0.0.12:7447", "server " + strings.TrimPrefix(fes[1].url, "ws://")},
		[2]string{"    server 10.0.0.13:7447 max_fails=1 fail_timeout=5s;\n", ""})
	out := startNginx(t, nginx, dir, site)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, tlsConf := dialThroughNginx(ctx, t, tlsAddr, certPEM, dir, out)
	defer c.Close()
	tag := randomContent("lb")[3:]
	evs, index := signMany(t, 2, tag)
	sc := openSubs(t, c, "lb", 1, map[string]any{"kinds": []int{1}, "#t": []string{tag}}, index, len(evs))
	for i, fe := range fes {
		publishAll(t, []string{fe.url}, 1, evs[i:i+1])
	}
	s := sc.subs["lb-0"]
	for i := range s.got {
		for s.got[i].Load() == 0 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		if s.got[i].Load() != 1 {
			t.Fatalf("the event published at front-end %d reached the client behind nginx %d times", i, s.got[i].Load())
		}
	}

	// /didcomm: the front-end without the mesh role answers 503 and nginx
	// tries the other, so the client never sees the 503.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}, Timeout: 10 * time.Second}
	for range 4 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+tlsAddr+"/didcomm", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/didcomm-encrypted+json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			t.Fatalf("/didcomm through nginx answered 503: %s", body)
		}
	}
}
