package manage

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
)

// KindHTTPAuth is NIP-98's HTTP authorization event kind.
const KindHTTPAuth = 27235

// maxAuthHeader bounds the Authorization header the API decodes.
const maxAuthHeader = 8 << 10

// AuthError is a NIP-98 authorization the API refuses: the caller is
// answered 401 with Reason.
type AuthError struct {
	// Reason says what is wrong and what to fix.
	Reason string
}

func (e *AuthError) Error() string { return e.Reason }

func authErr(format string, args ...any) error {
	return &AuthError{Reason: fmt.Sprintf(format, args...)}
}

// CheckAuth checks a NIP-98 Authorization header ("Nostr " and a base64
// event) for a request: the event must be kind 27235, signed, made within
// window of now, with a u tag naming the request's URL (see SameURL), a
// method tag naming its method and a payload tag holding the SHA-256 of
// body (NIP-86 requires it). It returns the verified event.
func CheckAuth(header, method, requestURL string, body []byte, now time.Time, window time.Duration) (*nostr.Event, error) {
	if header == "" {
		return nil, authErr("missing Authorization header: sign a NIP-98 event (kind 27235) and send it as \"Nostr <base64>\"")
	}
	if len(header) > maxAuthHeader {
		return nil, authErr("Authorization header of %d bytes is over the limit of %d", len(header), maxAuthHeader)
	}
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Nostr") {
		return nil, authErr("Authorization must use the Nostr scheme: \"Nostr <base64 of a kind 27235 event>\"")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(strings.TrimSpace(token)); err != nil {
			return nil, authErr("Authorization token is not base64")
		}
	}
	var ev nostr.Event
	if err := ev.UnmarshalJSON(raw); err != nil {
		return nil, authErr("Authorization token is not a Nostr event: %v", err)
	}
	if ev.Kind != KindHTTPAuth {
		return nil, authErr("authorization event is kind %d; NIP-98 needs kind %d", ev.Kind, KindHTTPAuth)
	}
	if err := ev.Verify(); err != nil {
		return nil, authErr("authorization event does not verify: %v", err)
	}
	if d := now.Sub(time.Unix(ev.CreatedAt, 0)); d > window || d < -window {
		return nil, authErr("authorization event was made %s from this relay's clock, over the %s allowed; check the device clock and sign a fresh one", d.Round(time.Second), window)
	}
	if u := ev.Tags.Value("u"); u == "" {
		return nil, authErr("authorization event has no u tag; NIP-98 needs the request URL in it")
	} else if !SameURL(u, requestURL) {
		return nil, authErr("authorization event is for %q, not this relay's %q", u, requestURL)
	}
	if m := ev.Tags.Value("method"); !strings.EqualFold(m, method) {
		return nil, authErr("authorization event's method tag is %q, the request's %s", m, method)
	}
	sum := sha256.Sum256(body)
	p := ev.Tags.Value("payload")
	if p == "" {
		return nil, authErr("authorization event has no payload tag; NIP-86 needs the SHA-256 of the body in it")
	}
	if !strings.EqualFold(p, hex.EncodeToString(sum[:])) {
		return nil, authErr("authorization event's payload tag is not the SHA-256 of this request's body")
	}
	return &ev, nil
}

// SameURL reports whether a NIP-98 u tag names the request URL. Clients
// name a relay as ws(s):// or http(s)://, and a node behind a TLS proxy
// cannot know the scheme its clients used, so the scheme is not compared:
// the host (case-insensitively, default ports dropped), the path (a lone
// or trailing "/" ignored) and the query must match.
func SameURL(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil || ua.Host == "" || ub.Host == "" {
		return false
	}
	host := func(u *url.URL) string {
		h := strings.ToLower(u.Host)
		for _, p := range []string{":80", ":443"} {
			if strings.HasSuffix(h, p) {
				return strings.TrimSuffix(h, p)
			}
		}
		return h
	}
	path := func(u *url.URL) string { return strings.TrimSuffix(u.EscapedPath(), "/") }
	return host(ua) == host(ub) && path(ua) == path(ub) && ua.RawQuery == ub.RawQuery
}

// errNotAdmin is a valid authorization by a key the operator has not
// listed: 403.
var errNotAdmin = errors.New("forbidden: this key is not one of the relay's [manage] admins")
