package main

import (
	"strings"
	"testing"
)

// TestVerbHelp: --help of a command with verbs lists every verb on stdout
// and exits 0, as a command's own --help does.
func TestVerbHelp(t *testing.T) {
	for _, h := range []string{"--help", "-h", "help"} {
		code, out, errs := runCLI(t, "", "didcomm", h)
		if code != 0 {
			t.Fatalf("didcomm %s: exit %d stderr %q", h, code, errs)
		}
		for name := range didcommVerbs {
			if !strings.Contains(out, "  "+name+" ") {
				t.Fatalf("didcomm %s does not list %q:\n%s", h, name, out)
			}
		}
	}
}
