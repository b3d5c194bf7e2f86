package main

import (
	"encoding/json"
	"runtime"
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
