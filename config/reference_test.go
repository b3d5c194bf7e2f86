package config

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/config.md")

const referencePath = "../docs/config.md"

// TestReference holds docs/config.md to the configuration it documents.
func TestReference(t *testing.T) {
	want := Reference()
	if *update {
		if err := os.WriteFile(referencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("docs/config.md is stale: run go test ./config -run TestReference -update")
	}
}

// TestEveryKeyCommented: every key has a one-line comment, and the file
// init writes carries it above the key.
func TestEveryKeyCommented(t *testing.T) {
	c := Default()
	data, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	keys := Keys()
	if len(keys) < 90 {
		t.Fatalf("only %d keys found: the walk misses tables", len(keys))
	}
	for _, k := range keys {
		full := k.Name
		if k.Table != "" {
			full = k.Table + "." + k.Name
		}
		if k.Comment == "" || strings.Contains(k.Comment, "\n") {
			t.Errorf("%s has no one-line comment tag", full)
			continue
		}
		if !strings.Contains(string(data), "# "+k.Comment+"\n"+k.Name+" = ") {
			t.Errorf("config.toml does not carry %s's comment above it", full)
		}
	}
}
