package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/config"
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

// TestConfigEveryBadKeyStopsRun gives each duration key of config.toml a
// value that is not a duration, and each numeric key (sizes, counts,
// rates) a word, and each unsigned one a negative number, one run each;
// the node exits at load, so each run is short. The keys come from the
// schema (config.Keys), as config's TestBadValuesNameTheKey finds them in
// process, so a key declared later is covered here too.
func TestConfigEveryBadKeyStopsRun(t *testing.T) {
	durations, numbers := 0, 0
	for _, k := range config.Keys() {
		var values []string
		switch k.Kind() {
		case config.DurationValue:
			values = []string{"'soon'"}
			durations++
		case config.NumberValue:
			values = []string{"'lots'"}
			numbers++
		case config.UnsignedValue:
			values = []string{"'lots'", "-1"}
			numbers++
		}
		key := k.Full()
		for _, v := range values {
			file := k.Name + " = " + v + "\n"
			if k.Table != "" {
				file = "[" + k.Table + "]\n" + file
			}
			t.Run(key+"="+v, func(t *testing.T) { runRefused(t, file, key) })
		}
	}
	// The 15 duration keys, and the numeric ones of this version:
	// fewer means the schema walk lost some.
	if durations < 15 || numbers < 40 {
		t.Fatalf("the schema lists %d duration and %d numeric keys", durations, numbers)
	}
}
