package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errs := runCLI(t, "", args...)
		if code != 0 || !strings.HasPrefix(out, "fleetmesh ") || !strings.Contains(out, runtime.Version()) {
			t.Fatalf("%v: exit %d stdout %q stderr %q", args, code, out, errs)
		}
	}
	code, out, errs := runCLI(t, "", "version", "--json")
	var v buildVersion
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("version --json: exit %d stdout %q stderr %q", code, out, errs)
	}
	if v.Version == "" || v.Go != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Signatures == "" {
		t.Fatalf("version --json = %+v", v)
	}
}

// TestVersionOf: the release stamp wins, VCS data fills in the commit,
// and a build with neither says plainly it carries no VCS data.
func TestVersionOf(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	bare := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}}
	cases := []struct {
		name           string
		stamp, commit  string
		bi             *debug.BuildInfo
		short          string
		noCommitSaysIt bool
	}{
		{"release stamp", "v1.2.0", "fedcba987654", bare, "v1.2.0 (fedcba987654)", false},
		{"VCS data", "", "", vcs, "devel (0123456789ab, modified)", false},
		{"no VCS data", "", "", bare, "devel (no VCS data)", true},
		{"no build info", "", "", nil, "devel (no VCS data)", true},
		{"module version", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, "v0.9.0 (no VCS data)", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := versionOf(tc.stamp, tc.commit, tc.bi)
			if got := v.short(); got != tc.short {
				t.Fatalf("short() = %q, want %q", got, tc.short)
			}
			if (v.NoCommit != "") != tc.noCommitSaysIt || tc.noCommitSaysIt && !strings.Contains(v.NoCommit, "-buildvcs=false") {
				t.Fatalf("NoCommit = %q", v.NoCommit)
			}
		})
	}
}
