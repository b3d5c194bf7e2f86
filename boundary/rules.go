package boundary

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"fleetmesh.org/fleetmesh/nostr"
)

// Class is why an event may not cross.
type Class string

// The classes of docs/design.md §5.
const (
	Custody    Class = "custody"
	Billing    Class = "billing"
	Push       Class = "push"
	Credential Class = "credential"
	Ephemeral  Class = "ephemeral"
)

// Stored reports whether events of this class may be stored by a node for
// its own clients at all. Only ephemeral events may reach local clients;
// they are still never replicated.
func (c Class) Stored() bool { return c == Ephemeral }

// MarkerTag is the tag a private backend can stamp on events that must
// stay on its side: ["fleetmesh-boundary", "<class>"].
const MarkerTag = "fleetmesh-boundary"

// RuleSpec is a rule as configuration writes it. An event matches when its
// kind is in Kinds or in one of KindRanges (inclusive), or when it carries
// one of the Tags (name, and value if given).
type RuleSpec struct {
	Name       string     `toml:"name"`
	Class      Class      `toml:"class"`
	Reason     string     `toml:"reason"`
	Kinds      []int      `toml:"kinds"`
	KindRanges [][2]int   `toml:"kind_ranges"`
	Tags       [][]string `toml:"tags"`
}

// Rule is one compiled rule.
type Rule struct {
	Name   string
	Class  Class
	Reason string
	match  func(*nostr.Event) bool
}

// Matches reports whether the rule refuses ev.
func (r *Rule) Matches(ev *nostr.Event) bool { return r.match(ev) }

// Compile checks a spec and makes its rule.
func (s RuleSpec) Compile() (Rule, error) {
	switch s.Class {
	case Custody, Billing, Push, Credential, Ephemeral:
	default:
		return Rule{}, fmt.Errorf("boundary: rule %q: class %q must be custody, billing, push, credential or ephemeral", s.Name, s.Class)
	}
	if s.Name == "" {
		return Rule{}, fmt.Errorf("boundary: a %s rule has no name", s.Class)
	}
	if len(s.Kinds) == 0 && len(s.KindRanges) == 0 && len(s.Tags) == 0 {
		return Rule{}, fmt.Errorf("boundary: rule %q matches nothing: give kinds, kind_ranges or tags", s.Name)
	}
	for _, r := range s.KindRanges {
		if r[0] > r[1] {
			return Rule{}, fmt.Errorf("boundary: rule %q: kind range [%d, %d] is backwards", s.Name, r[0], r[1])
		}
	}
	for _, t := range s.Tags {
		if len(t) == 0 || len(t) > 2 || t[0] == "" {
			return Rule{}, fmt.Errorf("boundary: rule %q: a tag marker is [name] or [name, value]", s.Name)
		}
	}
	reason := s.Reason
	if reason == "" {
		reason = string(s.Class) + " data never crosses into the mesh"
	}
	spec := s
	return Rule{Name: s.Name, Class: s.Class, Reason: reason, match: func(ev *nostr.Event) bool {
		if slices.Contains(spec.Kinds, ev.Kind) {
			return true
		}
		for _, r := range spec.KindRanges {
			if ev.Kind >= r[0] && ev.Kind <= r[1] {
				return true
			}
		}
		for _, want := range spec.Tags {
			for _, t := range ev.Tags {
				if len(t) >= 1 && strings.EqualFold(t[0], want[0]) && (len(want) == 1 || (len(t) >= 2 && strings.EqualFold(t[1], want[1]))) {
					return true
				}
			}
		}
		return false
	}}, nil
}

// DefaultSpecs is the default rule set. Order matters only for which
// reason is reported when several rules match: the specific ones come
// before the catch-all ephemeral range.
func DefaultSpecs() []RuleSpec {
	return []RuleSpec{
		{Name: "nip46-remote-signing", Class: Custody, Kinds: []int{nostr.KindNIP46Signer},
			Reason: "NIP-46 remote-signing traffic is custody material"},
		{Name: "nip42-auth", Class: Credential, Kinds: []int{nostr.KindClientAuth},
			Reason: "NIP-42 AUTH events are account credentials"},
		{Name: "nip98-http-auth", Class: Credential, Kinds: []int{nostr.KindNIP98Auth},
			Reason: "NIP-98 HTTP auth events are account credentials"},
		{Name: "blossom-auth", Class: Credential, Kinds: []int{24242},
			Reason: "Blossom authorization events are account credentials"},
		{Name: "nip47-wallet-connect", Class: Billing, Kinds: []int{13194, 23194, 23195, 23196, 23197},
			Reason: "NIP-47 wallet-connect traffic is payment infrastructure"},
		{Name: "marker-custody", Class: Custody, Tags: [][]string{{MarkerTag, string(Custody)}}},
		{Name: "marker-billing", Class: Billing, Tags: [][]string{{MarkerTag, string(Billing)}}},
		{Name: "marker-push", Class: Push, Tags: [][]string{{MarkerTag, string(Push)}}},
		{Name: "marker-credential", Class: Credential, Tags: [][]string{{MarkerTag, string(Credential)}}},
		{Name: "ephemeral", Class: Ephemeral, KindRanges: [][2]int{{20000, 29999}},
			Reason: "ephemeral events are delivered live and never replicated"},
	}
}

// keyMaterialRule is built in and cannot be removed by configuration: an
// event that carries a private key, in any case or split across its
// content and tags, never crosses and is never stored.
var keyMaterialRule = Rule{
	Name:   "key-material",
	Class:  Custody,
	Reason: "the event carries private key material (nsec1/ncryptsec1)",
	match:  carriesKeyMaterial,
}

// bech32Charset is BIP-173's data alphabet.
const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// Lengths of the data parts: an nsec encodes 32 bytes plus a 6-character
// checksum (58 characters); an ncryptsec (NIP-49) is far longer, so any
// run of 50 or more is treated as one.
const (
	nsecDataLen      = 58
	ncryptsecDataMin = 50
)

// carriesKeyMaterial looks for nsec1…/ncryptsec1… in the event's content
// and tags. It folds case (bech32 may be written in upper case), drops
// separators people and scripts use to split a key (white space,
// zero-width characters, punctuation), and reads the content and every tag
// value joined in order, so a key split across the content and several tags
// is still found. A key within the content or within one value is a part of
// that joined text, so one search over it covers them all.
func carriesKeyMaterial(ev *nostr.Event) bool {
	n := len(ev.Content)
	for _, t := range ev.Tags {
		for _, v := range t {
			n += len(v)
		}
	}
	// The policy runs on every event a node takes in or sends on, up to
	// three times for a client's event, so the buffer is pooled. (A large
	// array on the stack instead made the short-lived goroutines that
	// check events grow their stacks.)
	bp := normalBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	if cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	buf = appendNormalized(buf, ev.Content)
	for _, t := range ev.Tags {
		for _, v := range t {
			buf = appendNormalized(buf, v)
		}
	}
	found := hasKey(buf)
	if cap(buf) <= maxPooledNormal {
		*bp = buf
		normalBufs.Put(bp)
	}
	return found
}

// normalBufs holds carriesKeyMaterial's buffers; one over maxPooledNormal
// (a contact list of thousands of tags) is left to the collector.
var normalBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledNormal = 64 << 10

// asciiNormal maps each ASCII byte to what appendNormalized keeps of it:
// letters lowercased, digits as they are, 0 for anything dropped.
var asciiNormal = func() (t [utf8.RuneSelf]byte) {
	for c := range t {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			t[c] = byte(c)
		case c >= 'A' && c <= 'Z':
			t[c] = byte(c) + ('a' - 'A')
		}
	}
	return t
}()

// appendNormalized appends s lowercased, with only its letters and digits.
// A non-ASCII letter is appended as '|', which is not bech32 and so ends a
// run; other non-ASCII characters are dropped like ASCII separators.
func appendNormalized(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if m := asciiNormal[c]; m != 0 {
				dst = append(dst, m)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsLetter(r) {
			dst = append(dst, '|')
		}
		i += size
	}
	return dst
}

func hasKey(s []byte) bool {
	for _, hrp := range []struct {
		prefix string
		min    int
	}{{"nsec1", nsecDataLen}, {"ncryptsec1", ncryptsecDataMin}} {
		rest := s
		for {
			i := bytes.Index(rest, []byte(hrp.prefix))
			if i < 0 {
				break
			}
			rest = rest[i+len(hrp.prefix):]
			n := 0
			for n < len(rest) && strings.IndexByte(bech32Charset, rest[n]) >= 0 {
				n++
			}
			if n >= hrp.min {
				return true
			}
		}
	}
	return false
}
