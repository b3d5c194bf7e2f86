package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// Result is one check's outcome.
type Result struct {
	Name string
	// Err is why the check failed; nil when it passed or was skipped.
	Err error
	// Skipped says why a check did not apply (the node does not advertise
	// the NIP it needs).
	Skipped string
}

// Target is a node under test.
type Target struct {
	// URL is the relay's WebSocket URL (ws:// or wss://).
	URL string
	// Timeout bounds each wait for an answer (default 10 s).
	Timeout time.Duration
	// Expiry is how long the events the suite publishes live: each carries
	// a NIP-40 expiration tag this far after its creation (default 1 h), so
	// that a node that keeps them, or replicates them, drops them on its own.
	Expiry time.Duration

	http    string
	nips    []int
	key     nostr.SecretKey
	runID   string
	created int64
	made    []string // ids of the stored kinds' events made, for the clean-up
}

type check struct {
	name string
	nip  int // 0: always applies
	run  func(ctx context.Context, t *Target, c *client) error
}

// checks is the suite, in the order it runs.
var checks = []check{
	{"nip11-document", 0, checkNIP11},
	{"publish-and-read-back", 0, checkPublishRead},
	{"duplicate-is-accepted", 0, checkDuplicate},
	{"bad-signature-is-invalid", 0, checkBadSignature},
	{"live-subscription", 0, checkLive},
	{"replaceable-keeps-newest", 0, checkReplaceable},
	{"addressable-keeps-newest-per-d", 0, checkAddressable},
	{"ephemeral-is-not-stored", 0, checkEphemeral},
	{"malformed-frame-spares-subscriptions", 0, checkMalformed},
	{"deletion", 9, checkDeletion},
	{"count", 45, checkCount},
	{"boundary-key-material", 0, checkBoundaryKey},
	{"boundary-remote-signing", 0, boundaryKind(nostr.KindNIP46Signer)},
	{"boundary-http-auth-credential", 0, boundaryKind(nostr.KindNIP98Auth)},
	// Last: delete (NIP-09) what the suite published, and check nothing of
	// it is still served.
	{"cleanup-deletes-its-events", 9, checkCleanup},
}

// Names lists the checks in order.
func Names() []string {
	out := make([]string, len(checks))
	for i, c := range checks {
		out[i] = c.name
	}
	return out
}

// Run runs every check against the target and reports each result to
// report as it finishes. It returns the results.
func Run(ctx context.Context, t *Target, report func(Result)) ([]Result, error) {
	if t.Timeout <= 0 {
		t.Timeout = 10 * time.Second
	}
	if t.Expiry <= 0 {
		t.Expiry = time.Hour
	}
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") {
		return nil, fmt.Errorf("conformance: target %q is not a ws:// or wss:// URL", t.URL)
	}
	t.http = strings.Replace(t.URL, "ws", "http", 1)
	if t.key, err = nostr.GenerateSecretKey(); err != nil {
		return nil, err
	}
	var id [6]byte
	rand.Read(id[:])
	t.runID = "fleetmesh-conformance-" + hex.EncodeToString(id[:])
	t.created = time.Now().Unix()
	var results []Result
	for _, ch := range checks {
		r := Result{Name: ch.name}
		if ch.nip != 0 && t.nips != nil && !slices.Contains(t.nips, ch.nip) {
			r.Skipped = fmt.Sprintf("the node does not advertise NIP-%02d", ch.nip)
		} else {
			c, err := dial(ctx, t.URL, t.Timeout)
			if err != nil {
				r.Err = err
			} else {
				r.Err = ch.run(ctx, t, c)
				c.close()
			}
		}
		results = append(results, r)
		if report != nil {
			report(r)
		}
	}
	return results, nil
}

// event makes a signed event of this run, tagged with the run id so that
// checks find their own events and nobody else's, and with an expiration
// (NIP-40) so that none outlives the run for long.
func (t *Target) event(kind int, content string, tags ...[]string) *nostr.Event {
	t.created++
	base := nostr.Tags{{"t", t.runID}, {"expiration", strconv.FormatInt(t.created+int64(t.Expiry/time.Second), 10)}}
	ev := &nostr.Event{CreatedAt: t.created, Kind: kind, Tags: append(base, tags...), Content: content}
	if err := t.key.Sign(ev); err != nil {
		panic(err)
	}
	if kind != nostr.KindDeletion && !(kind >= 20000 && kind < 30000) {
		t.made = append(t.made, ev.IDHex())
	}
	return ev
}

// mine narrows f to this run's events, which carry its id as a t tag.
func (t *Target) mine(f nostr.Filter) nostr.Filter {
	f.Tags = map[string][]string{"t": {t.runID}}
	return f
}

func idsOf(evs []*nostr.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.IDHex()
	}
	return out
}

func mustAccept(c *client, ev *nostr.Event, what string) error {
	ok, msg, err := c.publish(ev)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s was refused: %q", what, msg)
	}
	return nil
}

// publishElsewhere publishes on a second connection, so that the checking
// connection's live EVENT is not read (and skipped) while waiting for OK.
func (t *Target) publishElsewhere(ev *nostr.Event, what string) error {
	pub, err := dial(context.Background(), t.URL, t.Timeout)
	if err != nil {
		return err
	}
	defer pub.close()
	return mustAccept(pub, ev, what)
}

func checkNIP11(ctx context.Context, t *Target, _ *client) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.http, nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := (&http.Client{Timeout: t.Timeout}).Do(req)
	if err != nil {
		return fmt.Errorf("GET with Accept: application/nostr+json: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var doc struct {
		SupportedNIPs []int `json:"supported_nips"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("NIP-11 document is not JSON: %w", err)
	}
	if !slices.Contains(doc.SupportedNIPs, 1) {
		return fmt.Errorf("supported_nips %v does not include 1", doc.SupportedNIPs)
	}
	t.nips = doc.SupportedNIPs
	return nil
}

func checkPublishRead(_ context.Context, t *Target, c *client) error {
	ev := t.event(1, "hello from the conformance suite")
	if err := mustAccept(c, ev, "a valid note"); err != nil {
		return err
	}
	got, err := c.query("read", nostr.Filter{IDs: [][32]byte{ev.ID}})
	if err != nil {
		return err
	}
	if len(got) != 1 || got[0].ID != ev.ID {
		return fmt.Errorf("REQ by id after OK true returned %d events, want the one published", len(got))
	}
	return nil
}

func checkDuplicate(_ context.Context, t *Target, c *client) error {
	ev := t.event(1, "twice")
	if err := mustAccept(c, ev, "a note"); err != nil {
		return err
	}
	ok, msg, err := c.publish(ev)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("the same event again got OK false %q; NIP-01 answers true with \"duplicate:\"", msg)
	}
	return nil
}

func checkBadSignature(_ context.Context, t *Target, c *client) error {
	ev := t.event(1, "tampered")
	ev.Sig[0] ^= 0xff
	ok, msg, err := c.publish(ev)
	if err != nil {
		return err
	}
	if ok || !strings.HasPrefix(msg, "invalid:") {
		return fmt.Errorf("an event with a broken signature got OK %v %q, want false with \"invalid:\"", ok, msg)
	}
	return nil
}

func checkLive(_ context.Context, t *Target, c *client) error {
	if _, err := c.query("live", t.mine(nostr.Filter{Kinds: []int{1}, HasLimit: true})); err != nil {
		return err
	}
	ev := t.event(1, "live")
	if err := t.publishElsewhere(ev, "a note"); err != nil {
		return err
	}
	_, err := c.next(func(m *nostr.RelayMessage) bool {
		return m.Type == nostr.MsgEvent && m.SubID == "live" && m.Event.ID == ev.ID
	})
	if err != nil {
		return fmt.Errorf("a live subscription did not receive an event published on another connection: %w", err)
	}
	return nil
}

func checkReplaceable(_ context.Context, t *Target, c *client) error {
	v1, v2 := t.event(10078, "v1"), t.event(10078, "v2")
	if err := mustAccept(c, v1, "a replaceable event"); err != nil {
		return err
	}
	if err := mustAccept(c, v2, "its newer version"); err != nil {
		return err
	}
	got, err := c.query("repl", t.mine(nostr.Filter{Kinds: []int{10078}, Authors: [][32]byte{v1.PubKey}}))
	if err != nil {
		return err
	}
	if len(got) != 1 || got[0].ID != v2.ID {
		return fmt.Errorf("after two versions of a replaceable event the relay serves %v, want only the newer", idsOf(got))
	}
	return nil
}

func checkAddressable(_ context.Context, t *Target, c *client) error {
	a1, b1, a2 := t.event(30078, "a1", []string{"d", "a"}), t.event(30078, "b1", []string{"d", "b"}), t.event(30078, "a2", []string{"d", "a"})
	for _, ev := range []*nostr.Event{a1, b1, a2} {
		if err := mustAccept(c, ev, "an addressable event"); err != nil {
			return err
		}
	}
	got, err := c.query("addr", t.mine(nostr.Filter{Kinds: []int{30078}}))
	if err != nil {
		return err
	}
	ids := idsOf(got)
	if len(got) != 2 || !slices.Contains(ids, a2.IDHex()) || !slices.Contains(ids, b1.IDHex()) {
		return fmt.Errorf("addressable events: relay serves %d events, want the newest per d tag (2)", len(got))
	}
	return nil
}

func checkEphemeral(_ context.Context, t *Target, c *client) error {
	if _, err := c.query("eph", t.mine(nostr.Filter{Kinds: []int{20078}, HasLimit: true})); err != nil {
		return err
	}
	ev := t.event(20078, "ephemeral")
	if err := t.publishElsewhere(ev, "an ephemeral event"); err != nil {
		return err
	}
	if _, err := c.next(func(m *nostr.RelayMessage) bool {
		return m.Type == nostr.MsgEvent && m.SubID == "eph"
	}); err != nil {
		return fmt.Errorf("an ephemeral event was not delivered live: %w", err)
	}
	got, err := c.query("eph-stored", nostr.Filter{IDs: [][32]byte{ev.ID}})
	if err != nil {
		return err
	}
	if len(got) != 0 {
		return errors.New("an ephemeral event was stored and served to a later REQ")
	}
	return nil
}

func checkMalformed(_ context.Context, t *Target, c *client) error {
	if _, err := c.query("keep", t.mine(nostr.Filter{Kinds: []int{1}, HasLimit: true})); err != nil {
		return err
	}
	for _, junk := range []string{`not json`, `["EVENT"]`, `["REQ"]`, `[1,2,3]`, `{"a":1}`} {
		if err := c.sendRaw([]byte(junk)); err != nil {
			return fmt.Errorf("the relay closed the connection after %q: %w", junk, err)
		}
	}
	if err := t.publishElsewhere(t.event(1, "after junk"), "a note after malformed frames"); err != nil {
		return err
	}
	if _, err := c.next(func(m *nostr.RelayMessage) bool {
		return m.Type == nostr.MsgEvent && m.SubID == "keep"
	}); err != nil {
		return fmt.Errorf("a subscription stopped working after malformed frames: %w", err)
	}
	return nil
}

func checkDeletion(_ context.Context, t *Target, c *client) error {
	ev := t.event(1, "to be deleted")
	if err := mustAccept(c, ev, "a note"); err != nil {
		return err
	}
	if err := mustAccept(c, t.event(nostr.KindDeletion, "", []string{"e", ev.IDHex()}), "a deletion request"); err != nil {
		return err
	}
	got, err := c.query("del", nostr.Filter{IDs: [][32]byte{ev.ID}})
	if err != nil {
		return err
	}
	if len(got) != 0 {
		return errors.New("an event deleted by its author (NIP-09) is still served")
	}
	return nil
}

func checkCount(_ context.Context, t *Target, c *client) error {
	for i := range 3 {
		if err := mustAccept(c, t.event(7, fmt.Sprint(i)), "a reaction"); err != nil {
			return err
		}
	}
	if err := c.send(nostr.ClientMessage{Type: nostr.MsgCount, SubID: "cnt", Filters: []nostr.Filter{t.mine(nostr.Filter{Kinds: []int{7}})}}); err != nil {
		return err
	}
	m, err := c.next(func(m *nostr.RelayMessage) bool {
		return (m.Type == nostr.MsgCount || m.Type == nostr.MsgClosed) && m.SubID == "cnt"
	})
	if err != nil {
		return err
	}
	if m.Type == nostr.MsgClosed {
		return fmt.Errorf("COUNT answered %s", m.AppendJSON(nil))
	}
	if m.Count != 3 {
		return fmt.Errorf("COUNT = %d, want 3", m.Count)
	}
	return nil
}

// A bech32 nsec of a throwaway key; the check only needs its shape.
func throwawayNsec() string {
	return "nsec1" + strings.Repeat("q", 52) + "3n5ry8"
}

func checkBoundaryKey(_ context.Context, t *Target, c *client) error {
	ev := t.event(1, "backup: "+strings.ToUpper(throwawayNsec()))
	ok, msg, err := c.publish(ev)
	if err != nil {
		return err
	}
	if ok || !strings.HasPrefix(msg, "blocked:") {
		return fmt.Errorf("an event carrying an nsec got OK %v %q, want false with \"blocked:\"", ok, msg)
	}
	got, err := c.query("key", nostr.Filter{IDs: [][32]byte{ev.ID}})
	if err != nil {
		return err
	}
	if len(got) != 0 {
		return errors.New("an event carrying key material is served")
	}
	return nil
}

func boundaryKind(kind int) func(context.Context, *Target, *client) error {
	return func(_ context.Context, t *Target, c *client) error {
		ok, msg, err := c.publish(t.event(kind, "boundary"))
		if err != nil {
			return err
		}
		if ok || !strings.HasPrefix(msg, "blocked:") {
			return fmt.Errorf("a kind %d event got OK %v %q, want false with \"blocked:\"", kind, ok, msg)
		}
		return nil
	}
}

// checkCleanup deletes every event of the run with one NIP-09 request and
// checks that none is served afterwards. The deletion request itself stays
// until its expiration.
func checkCleanup(_ context.Context, t *Target, c *client) error {
	tags := make([][]string, 0, len(t.made)+1)
	for _, id := range t.made {
		tags = append(tags, []string{"e", id})
	}
	if err := mustAccept(c, t.event(nostr.KindDeletion, "fleetmesh conformance run "+t.runID+" cleans up", tags...), "the clean-up deletion request"); err != nil {
		return err
	}
	got, err := c.query("left", t.mine(nostr.Filter{}))
	if err != nil {
		return err
	}
	for _, ev := range got {
		if ev.Kind != nostr.KindDeletion {
			return fmt.Errorf("after the clean-up the node still serves %d of the run's events (first: kind %d %s)", len(got), ev.Kind, ev.IDHex())
		}
	}
	return nil
}
