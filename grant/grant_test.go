package grant

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
)

func TestSignCheck(t *testing.T) {
	a, _ := identity.KeyFromSeed(bytes.Repeat([]byte{1}, 32))
	b, _ := identity.KeyFromSeed(bytes.Repeat([]byte{2}, 32))
	g := New(a.DID(), b.DID(), meter.Events, 100, time.Hour, time.Unix(1000, 0), 24*time.Hour, time.Minute)
	if err := g.Check(false); err == nil || !strings.Contains(err.Error(), "grantor signature") {
		t.Fatalf("unsigned grant: %v", err)
	}
	g.Sign(a)
	if err := g.Check(false); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(true); err == nil {
		t.Fatal("a grant signed by the grantor only passed needBoth")
	}
	g.Sign(b)
	raw, _ := g.Encode()
	got, err := Decode(raw)
	if err != nil || got.Check(true) != nil {
		t.Fatal(err)
	}
	got.Quota++
	if got.Check(true) == nil {
		t.Fatal("changed quota verified")
	}
	if !g.ActiveAt(time.Unix(2000, 0), 0) || g.ActiveAt(time.Unix(2000, 0), 1500) || g.ActiveAt(time.Unix(999, 0), 0) {
		t.Fatal("ActiveAt")
	}
}

func FuzzDecode(f *testing.F) {
	a, _ := identity.KeyFromSeed(bytes.Repeat([]byte{1}, 32))
	b, _ := identity.KeyFromSeed(bytes.Repeat([]byte{2}, 32))
	g := New(a.DID(), b.DID(), meter.Bytes, 100, time.Hour, time.Unix(1000, 0), time.Hour, 0)
	g.Sign(a)
	raw, _ := g.Encode()
	f.Add(raw)
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if g, err := Decode(data); err == nil {
			if g.Check(false) != nil {
				t.Fatal("decoded grant fails Check")
			}
		}
	})
}
