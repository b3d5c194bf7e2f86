package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// runRefused runs `fleetmesh run` on a home whose config.toml is file and
// checks that it exits non-zero at load, with stderr naming want.
func runRefused(t *testing.T, file string, want ...string) {
	t.Helper()
	home := newHome(t, file)
	_, errOut, err := cli(t, "run", "--home", home, "--listen", "127.0.0.1:0")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
		t.Fatalf("run with\n%s\nerr %v, want a non-zero exit; stderr:\n%s", file, err, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("run with\n%s\nstderr %q does not say %q", file, errOut, w)
		}
	}
}

// TestConfigBadDurationStopsRun is issue 12's interface: a duration that
// does not parse stops the node at start, naming the key, the value and
// what is accepted, instead of becoming a silent default.
func TestConfigBadDurationStopsRun(t *testing.T) {
	runRefused(t, "[mesh]\nsync_interval = 'soon'\n", "sync_interval", `"soon"`, `write a duration such as "30s"`)
}

// TestConfigEveryBadDurationKeyStopsRun gives each duration key of
// config.toml a value that is not a duration, one run each; the node exits
// at load, so each run is short. config's TestBadValuesNameTheKey checks
// the same keys, found from the schema, in process.
func TestConfigEveryBadDurationKeyStopsRun(t *testing.T) {
	for _, key := range []string{
		"relay.first_message_timeout", "relay.query_timeout",
		"mesh.sync_interval", "mesh.maintain_interval", "mesh.client_linger", "mesh.reprovide_interval",
		"mesh.storage_retention", "mesh.relay_search_interval",
		"mesh.relay_limits.reservation_ttl", "mesh.relay_limits.circuit_duration",
		"accounting.window", "accounting.dispute_period", "accounting.grant_length", "accounting.grant_notice",
		"dashboard.sample_interval",
	} {
		i := strings.LastIndex(key, ".")
		file := "[" + key[:i] + "]\n" + key[i+1:] + " = 'soon'\n"
		t.Run(key, func(t *testing.T) { runRefused(t, file, key, `"soon"`) })
	}
}
