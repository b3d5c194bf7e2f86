package manage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

func key(t testing.TB) nostr.SecretKey {
	t.Helper()
	k, err := nostr.GenerateSecretKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// authEvent signs a NIP-98 event; edit changes it before signing.
func authEvent(t testing.TB, k nostr.SecretKey, u, method string, body []byte, at time.Time, edit func(*nostr.Event)) *nostr.Event {
	t.Helper()
	sum := sha256.Sum256(body)
	ev := &nostr.Event{Kind: KindHTTPAuth, CreatedAt: at.Unix(), Tags: nostr.Tags{
		{"u", u}, {"method", method}, {"payload", hex.EncodeToString(sum[:])},
	}}
	if edit != nil {
		edit(ev)
	}
	if err := k.Sign(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func header(ev *nostr.Event) string {
	return "Nostr " + base64.StdEncoding.EncodeToString(ev.AppendJSON(nil))
}

func TestCheckAuth(t *testing.T) {
	k := key(t)
	now := time.Unix(1_800_000_000, 0)
	const u = "http://relay.example:7447/"
	body := []byte(`{"method":"supportedmethods","params":[]}`)
	good := func(edit func(*nostr.Event)) string { return header(authEvent(t, k, u, "POST", body, now, edit)) }
	for _, tc := range []struct {
		name   string
		header string
		url    string
		body   []byte
		want   string // substring of the error; "" is accepted
	}{
		{name: "good", header: good(nil)},
		{name: "ws scheme and no slash", header: header(authEvent(t, k, "wss://relay.example:7447", "post", body, now, nil))},
		{name: "missing", header: "", want: "missing Authorization"},
		{name: "other scheme", header: "Bearer x", want: "Nostr scheme"},
		{name: "not base64", header: "Nostr %%%", want: "not base64"},
		{name: "not an event", header: "Nostr " + base64.StdEncoding.EncodeToString([]byte(`{"x":1}`)), want: "not a Nostr event"},
		{name: "wrong kind", header: good(func(e *nostr.Event) { e.Kind = 1 }), want: "kind 1"},
		{name: "stale", header: header(authEvent(t, k, u, "POST", body, now.Add(-2*time.Minute), nil)), want: "clock"},
		{name: "future", header: header(authEvent(t, k, u, "POST", body, now.Add(2*time.Minute), nil)), want: "clock"},
		{name: "other host", header: header(authEvent(t, k, "http://other.example:7447/", "POST", body, now, nil)), want: "not this relay's"},
		{name: "other path", header: header(authEvent(t, k, "http://relay.example:7447/x", "POST", body, now, nil)), want: "not this relay's"},
		{name: "no u", header: good(func(e *nostr.Event) { e.Tags = e.Tags[1:] }), want: "no u tag"},
		{name: "wrong method", header: header(authEvent(t, k, u, "GET", body, now, nil)), want: "method tag"},
		{name: "no payload", header: good(func(e *nostr.Event) { e.Tags = e.Tags[:2] }), want: "no payload tag"},
		{name: "wrong payload", header: good(nil), body: []byte(`{"method":"banpubkey","params":[]}`), want: "SHA-256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body
			if tc.body != nil {
				b = tc.body
			}
			url := u
			if tc.url != "" {
				url = tc.url
			}
			ev, err := CheckAuth(tc.header, "POST", url, b, now, time.Minute)
			if tc.want == "" {
				if err != nil || ev.PubKey != k.PubKey() {
					t.Fatalf("refused a good authorization: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
	// A tampered signature.
	ev := authEvent(t, k, u, "POST", body, now, nil)
	ev.Sig[0] ^= 1
	if _, err := CheckAuth(header(ev), "POST", u, body, now, time.Minute); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("bad signature: err = %v", err)
	}
}

type fixture struct {
	t       *testing.T
	lists   *Lists
	srv     *httptest.Server
	admin   nostr.SecretKey
	deleted [][32]byte
	info    [3]string
	closed  []netip.Prefix
}

// openLists opens the lists in manage.db in dir, closed when the test
// ends.
func openLists(t testing.TB, dir string, o ListOptions) *Lists {
	t.Helper()
	fs, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(context.Background(), fs, o)
	if err != nil {
		fs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Close()
		fs.Close()
	})
	return l
}

func newFixture(t *testing.T, lim Limits) *fixture {
	t.Helper()
	f := &fixture{t: t, admin: key(t)}
	f.lists = openLists(t, t.TempDir(), ListOptions{
		Limits:       lim,
		SetInfo:      func(n, d, i string) { f.info = [3]string{n, d, i} },
		CloseClients: func(p netip.Prefix) int { f.closed = append(f.closed, p); return 0 },
	})
	api := NewAPI(f.lists, Options{
		Admins: [][32]byte{f.admin.PubKey()},
		Delete: func(_ context.Context, ids [][32]byte) (int, error) {
			f.deleted = append(f.deleted, ids...)
			return len(ids), nil
		},
		Metrics: NewMetrics(nil),
	})
	f.srv = httptest.NewServer(api)
	t.Cleanup(f.srv.Close)
	return f
}

// call makes a NIP-86 call signed by k and returns the status and answer.
func (f *fixture) call(k nostr.SecretKey, method string, params ...any) (int, Response) {
	f.t.Helper()
	if params == nil {
		params = []any{}
	}
	body, _ := json.Marshal(map[string]any{"method": method, "params": params})
	ev := authEvent(f.t, k, f.srv.URL, "POST", body, time.Now(), nil)
	return f.post(header(ev), body)
}

func (f *fixture) post(auth string, body []byte) (int, Response) {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/nostr+json+rpc")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r Response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		f.t.Fatalf("answer is not JSON: %v", err)
	}
	return resp.StatusCode, r
}

func TestAPIBanAndUnban(t *testing.T) {
	f := newFixture(t, Limits{})
	spammer := key(t).PubKey()
	hook := f.lists.RelayHook(nil)
	ev := &nostr.Event{PubKey: spammer, Kind: 1}
	ctx := context.Background()
	if r := hook(ctx, ev); r != "" {
		t.Fatalf("refused before any ban: %s", r)
	}
	st, r := f.call(f.admin, "banpubkey", hex.EncodeToString(spammer[:]), "spam")
	if st != 200 || r.Error != "" || r.Result != true {
		t.Fatalf("banpubkey: %d %+v", st, r)
	}
	if r := hook(ctx, ev); !strings.HasPrefix(r, "blocked: ") || !strings.Contains(r, "spam") {
		t.Fatalf("banned author's event: refusal %q", r)
	}
	_, r = f.call(f.admin, "listbannedpubkeys")
	if got, _ := json.Marshal(r.Result); !strings.Contains(string(got), hex.EncodeToString(spammer[:])) || !strings.Contains(string(got), `"reason":"spam"`) {
		t.Fatalf("listbannedpubkeys = %s", got)
	}
	if st, r = f.call(f.admin, "unbanpubkey", hex.EncodeToString(spammer[:])); st != 200 || r.Error != "" {
		t.Fatalf("unbanpubkey: %d %+v", st, r)
	}
	if r := hook(ctx, ev); r != "" {
		t.Fatalf("refused after unban: %s", r)
	}
}

func TestAPIRefusesOutsiders(t *testing.T) {
	f := newFixture(t, Limits{})
	body := []byte(`{"method":"banpubkey","params":["` + strings.Repeat("ab", 32) + `"]}`)
	other := key(t)
	stale := authEvent(t, f.admin, f.srv.URL, "POST", body, time.Now().Add(-5*time.Minute), nil)
	wrongHash := authEvent(t, f.admin, f.srv.URL, "POST", []byte("other"), time.Now(), nil)
	good := authEvent(t, f.admin, f.srv.URL, "POST", body, time.Now(), nil)
	for _, tc := range []struct {
		name string
		auth string
		want int
	}{
		{"no authorization", "", 401},
		{"stale", header(stale), 401},
		{"wrong payload hash", header(wrongHash), 401},
		{"unlisted key", header(authEvent(t, other, f.srv.URL, "POST", body, time.Now(), nil)), 403},
		{"good", header(good), 200},
		{"replayed", header(good), 401},
	} {
		st, r := f.post(tc.auth, body)
		if st != tc.want {
			t.Errorf("%s: status %d (%q), want %d", tc.name, st, r.Error, tc.want)
		}
		if tc.want != 200 && r.Error == "" {
			t.Errorf("%s: refused with no error message", tc.name)
		}
	}
	banned, _ := f.lists.list(context.Background(), ListBannedPubkeys)
	if len(banned) != 1 {
		t.Fatalf("%d bans after one good call", len(banned))
	}
}

func TestAPIMethods(t *testing.T) {
	f := newFixture(t, Limits{MaxEntries: 3})
	ctx := context.Background()
	hook := f.lists.RelayHook(nil)
	mesh := relay.WithOrigin(ctx, relay.FromMesh)
	id := sha256.Sum256([]byte("an event"))
	idHex := hex.EncodeToString(id[:])
	author := key(t).PubKey()
	ok := func(method string, params ...any) Response {
		t.Helper()
		st, r := f.call(f.admin, method, params...)
		if st != 200 || r.Error != "" {
			t.Fatalf("%s%v: %d %+v", method, params, st, r)
		}
		return r
	}
	refuse := func(method, want string, params ...any) {
		t.Helper()
		st, r := f.call(f.admin, method, params...)
		if st != 200 || !strings.Contains(r.Error, want) {
			t.Fatalf("%s%v: %d %+v, want an error with %q", method, params, st, r, want)
		}
	}
	r := ok("supportedmethods")
	if ms, _ := json.Marshal(r.Result); !strings.Contains(string(ms), `"banevent"`) {
		t.Fatalf("supportedmethods = %s", ms)
	}

	ok("banevent", idHex, "illegal")
	if len(f.deleted) != 1 || f.deleted[0] != id {
		t.Fatalf("banevent did not remove the event from the store: %x", f.deleted)
	}
	if r := hook(mesh, &nostr.Event{ID: id, Kind: 1}); !strings.HasPrefix(r, "blocked: ") {
		t.Fatalf("banned event offered by the mesh: %q", r)
	}
	ok("allowevent", idHex)
	if r := hook(mesh, &nostr.Event{ID: id, Kind: 1}); r != "" {
		t.Fatalf("allowed event refused: %q", r)
	}

	// Kinds: the allowed list holds the node's clients, not the mesh.
	ok("allowkind", 1)
	if r := hook(ctx, &nostr.Event{Kind: 7}); !strings.Contains(r, "kind 7") {
		t.Fatalf("kind 7 with only kind 1 allowed: %q", r)
	}
	if r := hook(mesh, &nostr.Event{Kind: 7}); r != "" {
		t.Fatalf("mesh event refused by the clients' kind list: %q", r)
	}
	ok("disallowkind", 1)
	if r := hook(ctx, &nostr.Event{Kind: 1}); !strings.Contains(r, "kind 1") {
		t.Fatalf("disallowed kind 1: %q", r)
	}
	r = ok("listdisallowedkinds")
	if ks, _ := json.Marshal(r.Result); string(ks) != "[1]" {
		t.Fatalf("listdisallowedkinds = %s", ks)
	}
	refuse("allowkind", "0 to 65535", 70000)

	// Allowed pubkeys.
	ok("allowpubkey", hex.EncodeToString(author[:]))
	if r := hook(ctx, &nostr.Event{PubKey: key(t).PubKey(), Kind: 2}); !strings.Contains(r, "only from the authors") {
		t.Fatalf("unlisted author with an allow list: %q", r)
	}
	if r := hook(ctx, &nostr.Event{PubKey: author, Kind: 2}); r != "" {
		t.Fatalf("allowed author refused: %q", r)
	}

	// Addresses.
	ok("blockip", "192.0.2.7", "flood")
	ok("blockip", "2001:db8::/48")
	if len(f.closed) != 2 {
		t.Fatalf("blockip closed no connections: %v", f.closed)
	}
	ch := f.lists.ClientHook(nil)
	for client, blocked := range map[string]bool{
		"192.0.2.7:5555": true, "192.0.2.8:5555": false, "[2001:db8:0:1::9]:1": true, "[2001:db9::1]:1": false, "[::ffff:192.0.2.7]:80": true,
	} {
		if got := ch(client) != ""; got != blocked {
			t.Errorf("client %s blocked = %v, want %v", client, got, blocked)
		}
	}
	refuse("blockip", "not an IP", "example.org")
	ok("unblockip", "192.0.2.7")
	if ch("192.0.2.7:1") != "" {
		t.Fatal("unblocked address still refused")
	}

	// NIP-11 fields.
	ok("changerelayname", "My relay")
	ok("changerelayicon", "https://relay.example/icon.png")
	if f.info != [3]string{"My relay", "", "https://relay.example/icon.png"} {
		t.Fatalf("info = %q", f.info)
	}

	// Bounds and bad calls.
	for i := range 3 {
		ok("banpubkey", strings.Repeat(string("abc"[i]), 64))
	}
	refuse("banpubkey", "list is full", strings.Repeat("d", 64))
	refuse("banpubkey", "64 hex", "npub1xyz")
	refuse("banpubkey", "needs its pubkey")
	refuse("frobnicate", "unsupported")
	refuse("changerelayname", "over the limit", strings.Repeat("x", 2000))
}

func TestListsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	fs, err := OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(ctx, fs, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pk := [32]byte{1}
	if err := l.BanPubkey(ctx, pk, "spam"); err != nil {
		t.Fatal(err)
	}
	p, _ := ParseAddr("198.51.100.0/24")
	if err := l.BlockIP(ctx, p, ""); err != nil {
		t.Fatal(err)
	}
	l.Close()
	fs.Close()
	l = openLists(t, dir, ListOptions{})
	if l.PubkeyRefusal(pk, false) == "" || l.AddrRefusal(netip.MustParseAddr("198.51.100.9")) == "" {
		t.Fatal("bans lost on reopen")
	}
}

func TestSameURL(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"wss://Relay.Example/", "http://relay.example", true},
		{"https://relay.example:443/", "http://relay.example", true},
		{"ws://127.0.0.1:7447", "http://127.0.0.1:7447/", true},
		{"ws://127.0.0.1:7448", "http://127.0.0.1:7447/", false},
		{"wss://relay.example/a", "http://relay.example/b", false},
		{"wss://relay.example/?x=1", "http://relay.example/", false},
		{"relay.example", "http://relay.example/", false},
	} {
		if got := SameURL(tc.a, tc.b); got != tc.same {
			t.Errorf("SameURL(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func FuzzCheckAuth(f *testing.F) {
	k, _ := nostr.GenerateSecretKey()
	body := []byte(`{"method":"supportedmethods","params":[]}`)
	now := time.Unix(1_800_000_000, 0)
	f.Add(header(authEvent(f, k, "http://r.example/", "POST", body, now, nil)), body)
	f.Add("Nostr e30=", []byte("{}"))
	f.Add("nostr", []byte(nil))
	f.Fuzz(func(t *testing.T, h string, b []byte) {
		ev, err := CheckAuth(h, "POST", "http://r.example/", b, now, time.Minute)
		if err == nil && (ev == nil || ev.Kind != KindHTTPAuth) {
			t.Fatalf("accepted %q without a kind %d event", h, KindHTTPAuth)
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"method":"banpubkey","params":["` + strings.Repeat("a", 64) + `","x"]}`))
	f.Add([]byte(`{"method":"allowkind","params":[1]}`))
	f.Add([]byte(`{"method":"allowkind","params":["1e9"]}`))
	f.Add([]byte(`[]`))
	l := openLists(f, f.TempDir(), ListOptions{Limits: Limits{MaxEntries: 50}})
	api := NewAPI(l, Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
		if err != nil {
			return
		}
		api.call(context.Background(), req) // must not panic
	})
}

// TestHoldOnce: an event held again stays queued once; one the operator
// allowed or banned is not queued again.
func TestHoldOnce(t *testing.T) {
	ctx := context.Background()
	l := openLists(t, t.TempDir(), ListOptions{})
	ids := [3][32]byte{{1}, {2}, {3}}
	for _, err := range []error{
		l.Hold(ctx, ids[0], []byte(`{}`), "first"),
		l.Hold(ctx, ids[0], []byte(`{}`), "second"),
		l.Hold(ctx, ids[1], []byte(`{}`), "x"),
		l.Hold(ctx, ids[2], []byte(`{}`), "x"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AllowEvent(ctx, ids[1], ""); err != nil {
		t.Fatal(err)
	}
	if err := l.BanEvent(ctx, ids[2], ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:] {
		if err := l.Hold(ctx, id, []byte(`{}`), "again"); err != nil {
			t.Fatal(err)
		}
	}
	held, err := l.Held(ctx)
	if err != nil || len(held) != 1 || held[0].Reason != "first" {
		t.Fatalf("held = %+v (%v), want only the first event, with its first reason", held, err)
	}
}
