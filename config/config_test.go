package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTripAndOverrides(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	def := Default()
	data, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Relay.Listen != DefaultListen || got.Relay.MaxLimit != def.Relay.MaxLimit {
		t.Fatalf("round trip changed the defaults: %+v", got.Relay)
	}
	os.WriteFile(path, []byte("class = \"anchor\"\n[relay]\nevents_per_second = 0\nauth_required_kinds = [4]\n"), 0o644)
	got, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Class != ClassAnchor || got.Relay.EventsPerSecond != 0 || got.Relay.MaxLimit != def.Relay.MaxLimit || len(got.Relay.AuthRequiredKinds) != 1 {
		t.Fatalf("partial file: %+v", got)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"[relay]\nmax_limt = 5\n", "max_limt"},
		{"class = \"server\"\n", "anchor, home or leaf"},
		{"[relay]\nevents_per_second = -1\n", ">= 0"},
		{"[relay]\nquery_timeout = \"ten\"\n", "query_timeout"},
		{"[relay\n", FileName},
		{"[[boundary.rules]]\nname = \"x\"\nclass = \"secret\"\nkinds = [1]\n", "class \"secret\""},
	} {
		path := filepath.Join(t.TempDir(), FileName)
		os.WriteFile(path, []byte(tc.file), 0o644)
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to mention %q", tc.file, err, tc.want)
		}
	}
}

func TestBoundaryRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte("[[boundary.rules]]\nname = \"acme-invoices\"\nclass = \"billing\"\nkinds = [31999]\ntags = [[\"t\", \"invoice\"]]\n"), 0o644)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Boundary.Rules) != 1 || cfg.Boundary.Rules[0].Kinds[0] != 31999 || cfg.Boundary.Rules[0].Tags[0][1] != "invoice" {
		t.Fatalf("got %+v", cfg.Boundary)
	}
}
