package main

import (
	"encoding/json"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/invite"
)

// inviteHome makes a home whose config listens on listen.
func inviteHome(t *testing.T, listen ...string) (string, *identity.Key) {
	t.Helper()
	dir := t.TempDir()
	if code, _, errs := runCLI(t, "", "init", "--home", dir); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	cfg := config.Default()
	cfg.Mesh.Listen = listen
	data, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, config.FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := identity.LoadKey(filepath.Join(dir, "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, k
}

// TestInviteFromConfig: with no node running, the code carries the
// configured listen addresses that can be dialled, and it verifies.
func TestInviteFromConfig(t *testing.T) {
	dir, k := inviteHome(t, "/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/udp/0/quic-v1")
	code, out, errs := runCLI(t, "", "invite", "--home", dir, "--json", "--ttl", "2h")
	if code != 0 {
		t.Fatalf("invite: exit %d: %s", code, errs)
	}
	var got inviteOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("invite --json printed %q: %v", out, err)
	}
	want := "/ip4/127.0.0.1/tcp/4001/p2p/" + k.PeerID().String()
	if got.Source != "config" || len(got.Addrs) != 1 || got.Addrs[0] != want {
		t.Fatalf("invite from config: %+v, want only %s", got, want)
	}
	inv, err := invite.Parse(got.Link, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if inv.DID() != k.DID() || inv.Bootstrap()[0] != want || time.Until(inv.Expires) > 2*time.Hour {
		t.Fatalf("code decodes to %s %v expiring %s", inv.DID(), inv.Bootstrap(), inv.Expires)
	}
}

func TestInviteRefuses(t *testing.T) {
	dir, _ := inviteHome(t, "/ip4/127.0.0.1/tcp/0")
	for _, args := range [][]string{
		{"--ttl", "0s"},
		{"--ttl", "1000h"},
		{"--addr", "198.51.100.7:4001"},
		{}, // no running node and only port 0 configured
	} {
		code, _, errs := runCLI(t, "", append([]string{"invite", "--home", dir}, args...)...)
		if code == 0 || errs == "" {
			t.Errorf("invite %v: exit %d, stderr %q", args, code, errs)
		}
	}
	code, out, errs := runCLI(t, "", "invite", "--home", dir, "--addr", "/ip4/198.51.100.7/tcp/4001")
	if code != 0 || !strings.Contains(out, "link    fleetmesh:fmjoin1") || !strings.Contains(out, "█") {
		t.Fatalf("invite --addr: exit %d\n%s%s", code, out, errs)
	}
}

// TestInviteQRDecodes reads the QR code `invite` draws back with a QR
// decoder nobody here wrote (gozxing, a port of ZXing): the terminal's
// half blocks become a bitmap, the decoder finds the code in it, and what
// it reads is the printed link, which parses as the code and verifies.
func TestInviteQRDecodes(t *testing.T) {
	dir, k := inviteHome(t)
	code, out, errs := runCLI(t, "", "invite", "--home", dir, "--addr", "/ip4/192.0.2.7/tcp/4001", "--addr", "/ip4/192.0.2.7/udp/4001/quic-v1")
	if code != 0 {
		t.Fatalf("invite: exit %d: %s", code, errs)
	}
	var link string
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if l, ok := strings.CutPrefix(line, "link    "); ok {
			link = l
		}
		if line != "" && strings.Trim(line, " █▀▄") == "" {
			rows = append(rows, line)
		}
	}
	if link == "" || len(rows) < 10 {
		t.Fatalf("invite printed no link or no QR:\n%s", out)
	}
	read := decodeTerminalQR(t, rows)
	if !strings.EqualFold(read, link) {
		t.Fatalf("the QR reads %q, the printed link is %q", read, link)
	}
	inv, err := invite.Parse(read, time.Now())
	if err != nil {
		t.Fatalf("the QR's text does not parse as a join code: %v", err)
	}
	if inv.DID() != k.DID() || len(inv.Bootstrap()) != 2 || !strings.HasPrefix(inv.Bootstrap()[0], "/ip4/192.0.2.7/") {
		t.Fatalf("the QR's code is of %s with %v", inv.DID(), inv.Bootstrap())
	}
}

// decodeTerminalQR turns a QR code drawn in half blocks (each character
// two modules, one above the other) into an image, a few pixels a module,
// and decodes it with gozxing.
func decodeTerminalQR(t *testing.T, rows []string) string {
	t.Helper()
	const scale = 4
	width := utf8.RuneCountInString(rows[0])
	img := image.NewGray(image.Rect(0, 0, width*scale, 2*len(rows)*scale))
	for y, row := range rows {
		for x, r := range []rune(row) {
			top, bottom := r == '█' || r == '▀', r == '█' || r == '▄'
			for i, dark := range []bool{top, bottom} {
				c := color.Gray{Y: 255}
				if dark {
					c = color.Gray{Y: 0}
				}
				for dy := range scale {
					for dx := range scale {
						img.SetGray(x*scale+dx, (2*y+i)*scale+dy, c)
					}
				}
			}
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("gozxing does not read the QR code: %v", err)
	}
	return res.GetText()
}
