package boundary

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcutil/bech32"

	"fleetmesh.org/fleetmesh/nostr"
)

func bech(t *testing.T, hrp string, data []byte) string {
	t.Helper()
	conv, err := bech32.ConvertBits(data, 8, 5, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bech32.Encode(hrp, conv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type corpusCase struct {
	name  string
	ev    *nostr.Event
	class Class // "" = must cross
}

func corpus(t *testing.T) []corpusCase {
	k, _ := nostr.GenerateSecretKey()
	nsec := bech(t, "nsec", k.Bytes())
	pk := k.PubKey()
	npub := bech(t, "npub", pk[:])
	ncryptsec := bech(t, "ncryptsec", append([]byte{0x02, 16}, make([]byte, 89)...))
	ev := func(kind int, content string, tags ...[]string) *nostr.Event {
		if tags == nil {
			tags = nostr.Tags{}
		}
		e := &nostr.Event{CreatedAt: 1_700_000_000, Kind: kind, Tags: tags, Content: content}
		if err := k.Sign(e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	half := len(nsec) / 2
	return []corpusCase{
		// Ordinary events that must cross.
		{"note", ev(1, "hello mesh"), ""},
		{"profile", ev(0, `{"name":"alice"}`), ""},
		{"contacts", ev(3, "", []string{"p", fmt.Sprintf("%x", pk)}), ""},
		{"reaction", ev(7, "+"), ""},
		{"article", ev(30023, "long form", []string{"d", "x"}), ""},
		{"relay list", ev(10002, "", []string{"r", "wss://relay.example.org"}), ""},
		{"last replaceable kind", ev(19999, "edge"), ""},
		{"first addressable kind", ev(30000, "edge", []string{"d", "y"}), ""},
		{"kind 40000", ev(40000, "x"), ""},
		{"zap receipt", ev(9735, ""), ""},
		{"note naming nsec as a word", ev(1, "never paste your nsec anywhere; an nsec1 key is secret"), ""},
		{"npub is public", ev(1, "follow me: "+npub, []string{"p", npub}), ""},
		{"short nsec1 prefix", ev(1, "nsec1qqqqqq is not a key"), ""},
		{"hashtag billing", ev(1, "my #billing woes", []string{"t", "billing"}), ""},
		{"hex id in content", ev(1, strings.Repeat("ab", 32)), ""},
		{"marker with unknown value", ev(1, "", []string{MarkerTag, "public"}), ""},

		// Custody.
		{"nip46", ev(nostr.KindNIP46Signer, "encrypted"), Custody},
		{"nsec in content", ev(1, "my key "+nsec), Custody},
		{"uppercase nsec", ev(1, strings.ToUpper(nsec)), Custody},
		{"mixed case nsec", ev(1, strings.ToUpper(nsec[:10])+nsec[10:]), Custody},
		{"nsec split by spaces", ev(1, nsec[:20]+" "+nsec[20:40]+"\n"+nsec[40:]), Custody},
		{"nsec split by zero-width spaces", ev(1, nsec[:30]+"\u200b"+nsec[30:]), Custody},
		{"nsec split by dashes", ev(1, nsec[:15]+"-"+nsec[15:30]+"-"+nsec[30:]), Custody},
		{"nsec in a tag", ev(1, "", []string{"alt", nsec}), Custody},
		{"nsec split across tags", ev(1, "", []string{"x", nsec[:half]}, []string{"x", nsec[half:]}), Custody},
		{"nsec split between content and tag", ev(1, nsec[:half], []string{"x", nsec[half:]}), Custody},
		{"ncryptsec", ev(1, ncryptsec), Custody},
		{"ncryptsec uppercase in tag", ev(30078, "", []string{"d", "backup"}, []string{"key", strings.ToUpper(ncryptsec)}), Custody},
		{"nsec in a profile", ev(0, `{"name":"oops","about":"`+nsec+`"}`), Custody},
		{"custody marker", ev(1, "", []string{MarkerTag, "custody"}), Custody},

		// Credentials.
		{"nip42 auth", ev(nostr.KindClientAuth, "", []string{"challenge", "c"}), Credential},
		{"nip98 http auth", ev(nostr.KindNIP98Auth, "", []string{"u", "https://x"}), Credential},
		{"blossom auth", ev(24242, ""), Credential},
		{"credential marker upper case", ev(1, "", []string{"FLEETMESH-BOUNDARY", "CREDENTIAL"}), Credential},

		// Billing and push.
		{"nwc info", ev(13194, "pay_invoice"), Billing},
		{"nwc request", ev(23194, "encrypted"), Billing},
		{"billing marker", ev(30078, "{}", []string{"d", "invoice-7"}, []string{MarkerTag, "billing"}), Billing},
		{"push marker", ev(30078, "{}", []string{"d", "push"}, []string{MarkerTag, "push"}), Push},
		{"configured billing kind", ev(31999, "invoice"), Billing},
		{"configured push tag", ev(30078, "", []string{"d", "apns"}), Push},

		// Ephemeral, at the edges of the range.
		{"first ephemeral kind", ev(20000, "x"), Ephemeral},
		{"last ephemeral kind", ev(29999, "x"), Ephemeral},
		{"typing indicator", ev(25000, "x"), Ephemeral},
	}
}

var extraRules = []RuleSpec{
	{Name: "acme-invoices", Class: Billing, Kinds: []int{31999}},
	{Name: "acme-push", Class: Push, Tags: [][]string{{"d", "apns"}}},
}

func TestCorpus(t *testing.T) {
	p, err := New(extraRules, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	crossed, refused := 0, 0
	for _, tc := range corpus(t) {
		r := p.Allow(tc.ev, ToMesh)
		switch {
		case tc.class == "" && r != nil:
			t.Errorf("%s: refused by %s (%s), must cross", tc.name, r.Name, r.Reason)
		case tc.class != "" && r == nil:
			t.Errorf("%s: crossed, must be refused as %s", tc.name, tc.class)
		case tc.class != "" && r.Class != tc.class:
			t.Errorf("%s: refused as %s by %s, want %s", tc.name, r.Class, r.Name, tc.class)
		case r == nil:
			crossed++
		default:
			refused++
		}
	}
	if p.Count("key-material", ToMesh) == 0 || p.Count("ephemeral", ToMesh) != 3 {
		t.Errorf("refusals not counted: key-material %v, ephemeral %v", p.Count("key-material", ToMesh), p.Count("ephemeral", ToMesh))
	}
	t.Logf("%d crossed, %d refused", crossed, refused)
}

// A replaceable event that replaces an allowed version with a forbidden
// one is refused on its own: the allowed version is what stays.
func TestReplacementIsCheckedOnItsOwn(t *testing.T) {
	p, _ := New(nil, nil, nil)
	k, _ := nostr.GenerateSecretKey()
	nsec := bech(t, "nsec", k.Bytes())
	v1 := &nostr.Event{CreatedAt: 1, Kind: 0, Tags: nostr.Tags{}, Content: `{"name":"a"}`}
	v2 := &nostr.Event{CreatedAt: 2, Kind: 0, Tags: nostr.Tags{}, Content: `{"name":"a","about":"` + nsec + `"}`}
	k.Sign(v1)
	k.Sign(v2)
	if p.Allow(v1, ReplicateOut) != nil || p.Allow(v2, ReplicateOut) == nil {
		t.Fatal("replaceable versions judged together")
	}
}

func TestRelayHook(t *testing.T) {
	p, _ := New(nil, nil, nil)
	k, _ := nostr.GenerateSecretKey()
	mk := func(kind int, content string) *nostr.Event {
		e := &nostr.Event{CreatedAt: 1, Kind: kind, Tags: nostr.Tags{}, Content: content}
		k.Sign(e)
		return e
	}
	if msg := p.RelayHook(context.Background(), mk(1, "nsec1"+strings.Repeat("q", 58))); !strings.HasPrefix(msg, "blocked: ") || !strings.Contains(msg, "key-material") {
		t.Fatalf("key material at the relay: %q", msg)
	}
	if msg := p.RelayHook(context.Background(), mk(24133, "")); !strings.HasPrefix(msg, "blocked: ") {
		t.Fatalf("NIP-46 at the relay: %q", msg)
	}
	if msg := p.RelayHook(context.Background(), mk(20001, "typing")); msg != "" {
		t.Fatalf("ephemeral must still reach local clients: %q", msg)
	}
	if p.Count("key-material", ClientStore) != 1 {
		t.Fatal("relay refusal not counted")
	}
}

func TestBadSpecs(t *testing.T) {
	for _, s := range []RuleSpec{
		{Name: "x", Class: "secret", Kinds: []int{1}},
		{Class: Billing, Kinds: []int{1}},
		{Name: "x", Class: Billing},
		{Name: "x", Class: Billing, KindRanges: [][2]int{{5, 1}}},
		{Name: "x", Class: Billing, Tags: [][]string{{}}},
	} {
		if _, err := New([]RuleSpec{s}, nil, nil); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}

func FuzzKeyMaterial(f *testing.F) {
	f.Add("nsec1"+strings.Repeat("q", 58), "")
	f.Add("hello", "nsec1")
	f.Fuzz(func(t *testing.T, content, tag string) {
		ev := &nostr.Event{Content: content, Tags: nostr.Tags{{"x", tag}}}
		got := carriesKeyMaterial(ev)
		// Adding separators or changing case never hides a key.
		spaced := &nostr.Event{Content: strings.ToUpper(strings.Join(strings.Split(content, ""), " ")), Tags: ev.Tags}
		if got && !carriesKeyMaterial(spaced) {
			t.Fatalf("key in %q hidden by spacing and case", content)
		}
	})
}

// normalizeReference is appendNormalized written the plain way, with
// package unicode deciding every character.
func normalizeReference(s string) []byte {
	var out []byte
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			out = append(out, byte(unicode.ToLower(r)))
		case r >= utf8.RuneSelf && unicode.IsLetter(r):
			out = append(out, '|')
		}
	}
	return out
}

func FuzzNormalize(f *testing.F) {
	f.Add("nsec1 QPZ-ry9\u200bx8gf")
	f.Add("über \xff\xfe Ünïcode 123")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := appendNormalized(nil, s), normalizeReference(s); !bytes.Equal(got, want) {
			t.Fatalf("appendNormalized(%q) = %q, want %q", s, got, want)
		}
	})
}

// BenchmarkMatch runs the default policy on a typical reply: text with
// punctuation and a non-ASCII word, "e" and "p" tags.
func BenchmarkMatch(b *testing.B) {
	p, err := New(nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ev := &nostr.Event{
		Kind:    1,
		Content: strings.Repeat("Good morning, mesh! The relay über the bridge is \"up\" again; 42 peers.\n", 4),
		Tags: nostr.Tags{
			{"e", strings.Repeat("ab", 32), "wss://relay.example.org", "reply"},
			{"p", strings.Repeat("cd", 32)},
			{"t", "fleetmesh"},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		if p.Match(ev) != nil {
			b.Fatal("refused")
		}
	}
}
