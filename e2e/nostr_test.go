package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// scriptTimeout bounds one nostr-tools script run.
const scriptTimeout = 2 * time.Minute

// nodeConfig returns a config.toml for a test node: rate limits off (tests
// that are not about them publish quickly from one IP), then the given
// [relay] keys, whose values are TOML literals.
func nodeConfig(relay map[string]string) string {
	kv := map[string]string{"events_per_second": "0", "ip_events_per_second": "0"}
	for k, v := range relay {
		kv[k] = v
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("class = \"home\"\n\n[relay]\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, kv[k])
	}
	b.WriteString("\n[store]\ndir = \"data\"\n")
	return b.String()
}

// runScript runs interop/nostr/SCRIPT against the node and fails the test
// with the script's TAP output (and the node's logs) if it fails.
func runScript(t *testing.T, n *node, script string, options map[string]any) {
	t.Helper()
	if options == nil {
		options = map[string]any{}
	}
	opts, err := json.Marshal(options)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	dir := filepath.Join(moduleRoot, "interop", "nostr")
	cmd := exec.CommandContext(ctx, "node", script, n.url, string(opts))
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil {
		t.Fatalf("node %s %s: %v\n%s\n=== fleetmesh node\n%s", script, n.url, err, out.String(), tail(n.output(), 4000))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Log(lines[len(lines)-1])
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// TestNostrTools runs each nostr-tools script against its own node, set up
// with the config the script's limits need.
func TestNostrTools(t *testing.T) {
	limits := map[string]any{
		"maxMessageBytes":  16384,
		"maxEventBytes":    4096,
		"maxTags":          20,
		"maxFilters":       3,
		"maxSubscriptions": 5,
		"maxLimit":         7,
		"defaultLimit":     5,
		"maxContentBytes":  3000,
	}
	for _, tc := range []struct {
		script  string
		config  map[string]string
		options map[string]any
		bug     string // a known relay bug this script shows: skip with it
	}{
		{script: "basic.mjs"},
		{script: "ordering.mjs"},
		{script: "replaceable.mjs"},
		{script: "deletion.mjs"},
		{script: "expiration.mjs"},
		{script: "ephemeral.mjs"},
		{script: "count.mjs"},
		{script: "malformed.mjs"},
		{script: "auth.mjs", config: map[string]string{"auth_required_kinds": "[4]"}, options: map[string]any{"authKind": 4}},
		{script: "auth.mjs", config: map[string]string{"auth_required_kinds": "[4]", "url": `"wss://relay.example.org"`},
			options: map[string]any{"authKind": 4, "publicURL": "wss://relay.example.org"}},
		{script: "protected.mjs"},
		{script: "limits.mjs", config: map[string]string{
			"max_message_bytes": "16384",
			"max_event_bytes":   "4096",
			"max_tags":          "20",
			"max_filters":       "3",
			"max_subscriptions": "5",
			"max_limit":         "7",
			"default_limit":     "5",
			"max_content_bytes": "3000",
		}, options: limits},
		{script: "ratelimit.mjs", config: map[string]string{"events_per_second": "1", "events_burst": "3"},
			options: map[string]any{"mode": "conn", "burst": 3}},
		{script: "ratelimit.mjs", config: map[string]string{"ip_events_per_second": "1", "ip_events_burst": "4"},
			options: map[string]any{"mode": "ip", "burst": 4}},
	} {
		name := strings.TrimSuffix(tc.script, ".mjs")
		if mode, ok := tc.options["mode"]; ok {
			name += "-" + mode.(string)
		}
		if _, ok := tc.options["publicURL"]; ok {
			name += "-public-url"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if tc.bug != "" {
				t.Skip("relay bug: " + tc.bug)
			}
			needNode(t)
			home := newHome(t, nodeConfig(tc.config))
			var n *node
			if _, ok := tc.config["url"]; ok {
				n = startNodeOnFreePort(t, home)
			} else {
				n = startNode(t, home)
			}
			runScript(t, n, tc.script, tc.options)
		})
	}
}
