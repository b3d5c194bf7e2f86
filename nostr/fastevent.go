package nostr

import (
	"bytes"
	"unicode/utf8"
)

// parseEventFast decodes the common shape of an EVENT message,
//
//	["EVENT",{"id":"…","pubkey":"…","created_at":N,"kind":N,"tags":[["…",…],…],"content":"…","sig":"…"}]
//
// in one pass with one copy of the message, for the relay's hot path; with
// withSub, it decodes the relay-to-client shape ["EVENT","<sub>",{…}]
// instead, which is most of what a client reads. It is a shortcut, not a
// second parser: it answers ok only for input that the encoding/json path
// of ParseClientMessage (or, withSub, ParseRelayMessage) accepts with
// exactly the same result, and gives up (ok false) on anything else, which
// includes every
// error, unknown or duplicated keys, \u escapes, invalid UTF-8, numbers
// that are not plain digits, and values out of range. The caller then
// takes the encoding/json path, which gives the error its meaning.
// FuzzParseEventFast holds it to that.
func parseEventFast(data []byte, withSub bool) (sub string, ev *Event, ok bool) {
	// Look at the type before copying the message: other types go their
	// way at no cost.
	i := skipWS(data, 0)
	if i == len(data) || data[i] != '[' {
		return "", nil, false
	}
	i = skipWS(data, i+1)
	if !bytes.HasPrefix(data[i:], []byte(`"EVENT"`)) {
		return "", nil, false
	}
	p := fastParser{src: string(data), i: i + len(`"EVENT"`)}
	p.ws()
	if !p.lit(`,`) {
		return "", nil, false
	}
	p.ws()
	if withSub {
		if sub, ok = p.str(); !ok {
			return "", nil, false
		}
		p.ws()
		if !p.lit(`,`) {
			return "", nil, false
		}
		p.ws()
	}
	if ev, ok = p.event(); !ok {
		return "", nil, false
	}
	p.ws()
	if !p.lit(`]`) {
		return "", nil, false
	}
	p.ws()
	if p.i != len(p.src) {
		return "", nil, false
	}
	return sub, ev, true
}

type fastParser struct {
	src string // the message; decoded strings without escapes share it
	i   int
}

func (p *fastParser) ws() {
	for p.i < len(p.src) && isWS(p.src[p.i]) {
		p.i++
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *fastParser) lit(s string) bool {
	if len(p.src)-p.i >= len(s) && p.src[p.i:p.i+len(s)] == s {
		p.i += len(s)
		return true
	}
	return false
}

// str decodes a JSON string whose only escapes are the two-character ones.
func (p *fastParser) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	// Find the end first, so that a string with escapes is decoded into a
	// buffer of its own size.
	start, escaped, ascii := p.i, false, true
	for {
		if p.i >= len(p.src) {
			return "", false
		}
		c := p.src[p.i]
		if c == '"' {
			break
		}
		switch {
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		case c == '\\':
			escaped = true
			p.i++ // the escaped character cannot end the string
		}
		p.i++
	}
	raw := p.src[start:p.i]
	p.i++
	if !ascii && !utf8.ValidString(raw) {
		// encoding/json would replace the bad bytes.
		return "", false
	}
	if !escaped {
		return raw, true
	}
	buf := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			buf = append(buf, c)
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			c = raw[i]
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		default:
			// \u escapes (and invalid ones) are left to encoding/json.
			return "", false
		}
		buf = append(buf, c)
	}
	return string(buf), true
}

// uint reads plain digits (no sign, fraction, exponent or leading zero) of
// at most 18 digits, so it cannot overflow.
func (p *fastParser) uint() (int64, bool) {
	start := p.i
	var n int64
	for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
		n = n*10 + int64(p.src[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.src[start] == '0') {
		return 0, false
	}
	return n, true
}

func (p *fastParser) hex(dst []byte) bool {
	s, ok := p.str()
	return ok && DecodeHex(dst, s) == nil
}

// tags decodes an array of non-empty arrays of strings. All the tags'
// items share one backing array.
func (p *fastParser) tags() (Tags, bool) {
	if !p.lit(`[`) {
		return nil, false
	}
	var items []string
	var ends []int
	p.ws()
	if !p.lit(`]`) {
		for {
			p.ws()
			if !p.lit(`[`) {
				return nil, false
			}
			p.ws()
			for {
				s, ok := p.str()
				if !ok {
					return nil, false
				}
				items = append(items, s)
				p.ws()
				if p.lit(`]`) {
					break
				}
				if !p.lit(`,`) {
					return nil, false
				}
				p.ws()
			}
			ends = append(ends, len(items))
			p.ws()
			if p.lit(`]`) {
				break
			}
			if !p.lit(`,`) {
				return nil, false
			}
		}
	}
	tags := make(Tags, len(ends))
	start := 0
	for i, end := range ends {
		tags[i] = items[start:end:end]
		start = end
	}
	return tags, true
}

// event decodes the event object; every field must appear exactly once.
func (p *fastParser) event() (*Event, bool) {
	const (
		fID = 1 << iota
		fPubKey
		fCreatedAt
		fKind
		fTags
		fContent
		fSig
		fAll = 1<<iota - 1
	)
	if !p.lit(`{`) {
		return nil, false
	}
	ev := new(Event)
	seen := 0
	for {
		p.ws()
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		p.ws()
		if !p.lit(`:`) {
			return nil, false
		}
		p.ws()
		var field int
		switch key {
		case "id":
			field, ok = fID, p.hex(ev.ID[:])
		case "pubkey":
			field, ok = fPubKey, p.hex(ev.PubKey[:])
		case "sig":
			field, ok = fSig, p.hex(ev.Sig[:])
		case "created_at":
			field = fCreatedAt
			ev.CreatedAt, ok = p.uint()
		case "kind":
			field = fKind
			var k int64
			k, ok = p.uint()
			ok = ok && k <= MaxKind
			ev.Kind = int(k)
		case "tags":
			field = fTags
			ev.Tags, ok = p.tags()
		case "content":
			field = fContent
			ev.Content, ok = p.str()
		default:
			return nil, false
		}
		if !ok || seen&field != 0 {
			return nil, false
		}
		seen |= field
		p.ws()
		if p.lit(`}`) {
			break
		}
		if !p.lit(`,`) {
			return nil, false
		}
	}
	return ev, seen == fAll
}
