package leaf

import (
	"errors"
	"testing"
	"time"
)

func TestClosedError(t *testing.T) {
	rc := &relayConn{url: "ws://home"}
	for _, tc := range []struct {
		reason string
		wait   time.Duration // 0: not a rate limit
	}{
		{"rate-limited: this connection's queries used their share of the relay; retry in 3s", 3 * time.Second},
		{"rate-limited: slow down", time.Second},
		{"rate-limited: retry in 250ms", 250 * time.Millisecond},
		{"rate-limited: retry in 90s", 10 * time.Second}, // capped
		{"blocked: not allowed", 0},
		{"error: internal", 0},
	} {
		err := rc.closedError(tc.reason)
		var rl *rateLimited
		switch {
		case tc.wait == 0 && errors.As(err, &rl):
			t.Errorf("%q: read as a rate limit", tc.reason)
		case tc.wait != 0 && (!errors.As(err, &rl) || rl.wait != tc.wait):
			t.Errorf("%q: %v, want a rate limit with wait %s", tc.reason, err, tc.wait)
		}
		if want := "ws://home closed the subscription: " + tc.reason; err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
	}
}
