package nostr

// Kind classes of NIP-01, which decide how a relay stores an event.
type KindClass int

// The kind classes.
const (
	Regular     KindClass = iota // stored, all kept
	Replaceable                  // 0, 3, 10000–19999: newest per (pubkey, kind)
	Ephemeral                    // 20000–29999: delivered live, never stored
	Addressable                  // 30000–39999: newest per (pubkey, kind, d tag)
)

// ClassOf returns the class of a kind.
func ClassOf(kind int) KindClass {
	switch {
	case kind == 0 || kind == 3 || (kind >= 10000 && kind < 20000):
		return Replaceable
	case kind >= 20000 && kind < 30000:
		return Ephemeral
	case kind >= 30000 && kind < 40000:
		return Addressable
	default:
		return Regular
	}
}

// Kinds with meaning to the relay itself.
const (
	KindDeletion    = 5     // NIP-09
	KindClientAuth  = 22242 // NIP-42
	KindNIP98Auth   = 27235 // NIP-98 HTTP auth
	KindNIP46Signer = 24133 // NIP-46 remote signing
)

// Tag returns the first tag with this name, or nil.
func (t Tags) Tag(name string) []string {
	for _, tag := range t {
		if len(tag) > 0 && tag[0] == name {
			return tag
		}
	}
	return nil
}

// Value returns the second element of the first tag with this name, or "".
func (t Tags) Value(name string) string {
	if tag := t.Tag(name); len(tag) > 1 {
		return tag[1]
	}
	return ""
}

// DTag is the "d" tag value that names an addressable event ("" if absent).
func (e *Event) DTag() string { return e.Tags.Value("d") }

// Expiration returns the NIP-40 expiration timestamp, if the event has one.
func (e *Event) Expiration() (int64, bool) {
	v := e.Tags.Value("expiration")
	if v == "" {
		return 0, false
	}
	var ts int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' || i >= 18 {
			return 0, false
		}
		ts = ts*10 + int64(c-'0')
	}
	return ts, true
}

// Protected reports whether the event carries NIP-70's ["-"] tag: only its
// author may publish it, after authenticating.
func (e *Event) Protected() bool {
	for _, tag := range e.Tags {
		if len(tag) == 1 && tag[0] == "-" {
			return true
		}
	}
	return false
}
