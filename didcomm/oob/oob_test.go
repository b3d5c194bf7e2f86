package oob

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInvitationURLRoundTrip(t *testing.T) {
	inv, err := New("did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp", GoalMediate, "mediate for a phone", "http://127.0.0.1:7777/didcomm", "/ip4/127.0.0.1/tcp/4001/p2p/12D3KooW")
	if err != nil {
		t.Fatal(err)
	}
	u, err := URL("http://127.0.0.1:7777/didcomm", inv)
	if err != nil {
		t.Fatal(err)
	}
	m, b, err := Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != inv.ID || m.From != inv.From || b.GoalCode != GoalMediate || len(b.Services) != 2 || b.Services[0].ServiceEndpoint.URI != "http://127.0.0.1:7777/didcomm" {
		t.Fatalf("parsed %+v %+v", m, b)
	}
	for _, bad := range []string{
		"http://x/?nothing=1",
		"http://x/?_oob=%%%",
		"http://x/?_oob=e30",
		`{"type":"https://didcomm.org/out-of-band/2.0/invitation","id":"1","body":{}}`,
		strings.Repeat("a", MaxURLBytes+1),
	} {
		if _, _, err := Parse(bad); err == nil {
			t.Errorf("parsed %.40q", bad)
		}
	}
}

func TestQR(t *testing.T) {
	const s = "http://127.0.0.1:7777/didcomm?_oob=eyJ0eXBlIjoiaW52aXRhdGlvbiJ9"
	mods, err := QRModules(s)
	if err != nil {
		t.Fatal(err)
	}
	n := len(mods)
	if n < 21 || (n-17)%4 != 0 {
		t.Fatalf("QR size %d is not a QR version size", n)
	}
	// Finder patterns: the three 7×7 corners are dark-edged squares.
	for _, c := range [][2]int{{0, 0}, {n - 7, 0}, {0, n - 7}} {
		for i := 0; i < 7; i++ {
			if !mods[c[1]][c[0]+i] || !mods[c[1]+6][c[0]+i] || !mods[c[1]+i][c[0]] || !mods[c[1]+i][c[0]+6] {
				t.Fatalf("no finder pattern at %v", c)
			}
		}
	}
	text, err := QR(s)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if want := (n + 8 + 1) / 2; len(lines) != want {
		t.Fatalf("%d lines, want %d", len(lines), want)
	}
	for i, l := range lines {
		if utf8.RuneCountInString(l) != n+8 {
			t.Fatalf("line %d has %d columns, want %d", i, utf8.RuneCountInString(l), n+8)
		}
	}
	// Row pair 2 (modules 4 and 5 with the quiet zone) starts the finder
	// pattern's top edge: column 4 is dark on top.
	if r := []rune(lines[2])[4]; r != '█' && r != '▀' {
		t.Fatalf("finder corner rendered as %q", r)
	}
}

func FuzzParse(f *testing.F) {
	inv, _ := New("did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp", GoalMediate, "g", "http://127.0.0.1:1/didcomm")
	u, _ := URL("http://127.0.0.1:1/didcomm", inv)
	f.Add(u)
	f.Add(`{"type":"https://didcomm.org/out-of-band/2.0/invitation","id":"1","from":"did:key:z","body":{}}`)
	f.Add("http://x/?_oob=e30")
	f.Fuzz(func(t *testing.T, s string) {
		m, b, err := Parse(s)
		if err != nil {
			return
		}
		if m.Type != TypeInvitation || m.ID == "" || m.From == "" || b == nil {
			t.Fatalf("accepted %+v", m)
		}
	})
}
