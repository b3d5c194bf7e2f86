package leaf

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/invite"
)

// TestPairJoinCode pairs with the join code `fleetmesh invite` prints:
// a code with an endpoint records the node by its DID with the relay on
// the endpoint's port; a code without one, or a changed one, is refused
// with what to do.
func TestPairJoinCode(t *testing.T) {
	k, err := identity.KeyFromSeed(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	addrs := []string{"/ip4/192.0.2.7/tcp/4001"}
	exp := time.Now().Add(time.Hour)
	withEndpoint, err := invite.New(k, addrs, "http://192.0.2.7:7447/didcomm", exp)
	if err != nil {
		t.Fatal(err)
	}
	without, err := invite.New(k, addrs, "", exp)
	if err != nil {
		t.Fatal(err)
	}
	tampered := []byte(withEndpoint)
	tampered[len(tampered)-10] ^= 1

	cases := []struct {
		name, in, wantErr string
	}{
		{"code", withEndpoint, ""},
		{"link, upper case", strings.ToUpper(invite.Link(withEndpoint)), ""},
		{"code without an endpoint", without, "carries no DIDComm endpoint"},
		{"changed code", string(tampered), "malformed join code"},
		{"neither", "fmjoin", "pair with the join code `fleetmesh invite` prints"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(NewConfig(t.TempDir()), &memKeys{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			err = l.Pair(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Pair = %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, err := l.Homes()
			if err != nil {
				t.Fatal(err)
			}
			var homes []homeState
			if err := json.Unmarshal(out, &homes); err != nil {
				t.Fatal(err)
			}
			want := homeState{DID: k.DID(), Endpoint: "http://192.0.2.7:7447/didcomm", Relay: "ws://192.0.2.7:7447/"}
			if len(homes) != 1 || homes[0] != want {
				t.Fatalf("homes %+v, want [%+v]", homes, want)
			}
		})
	}
}
