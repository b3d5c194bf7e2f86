package main

import (
	"regexp"
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

// verbList is the verbs a command's summary names, as "(pack|unpack)" at
// its end, or nil for a command without verbs.
var verbList = regexp.MustCompile(`\(([a-z]+(?:\|[a-z]+)+)\)$`)

// TestEveryCommandHelp: --help and -h of every command, and of every verb
// of a command that has verbs, exit 0 and print a usage that names it; the
// top-level help lists every command. A command's verbs are the ones its
// summary names, which must be the ones its --help lists.
func TestEveryCommandHelp(t *testing.T) {
	code, _, top := runCLI(t, "", "--help")
	if code != 0 {
		t.Fatalf("fleetmesh --help: exit %d", code)
	}
	if len(commands) < 10 {
		t.Fatalf("only %d commands registered", len(commands))
	}
	for name, cmd := range commands {
		if !strings.Contains(top, "  "+name+" ") {
			t.Errorf("fleetmesh --help does not list %s:\n%s", name, top)
		}
		for _, h := range []string{"--help", "-h"} {
			code, out, errs := runCLI(t, "", name, h)
			text := out + errs
			if code != 0 || !(strings.Contains(text, "fleetmesh "+name) || strings.Contains(text, "Usage of "+name)) {
				t.Errorf("%s %s: exit %d, printed:\n%s", name, h, code, text)
			}
		}
		m := verbList.FindStringSubmatch(cmd.summary)
		if m == nil {
			continue
		}
		vs := strings.Split(m[1], "|")
		_, out, errs := runCLI(t, "", name, "--help")
		for _, v := range vs {
			if !strings.Contains(out+errs, v) {
				t.Errorf("%s --help does not list its verb %s:\n%s%s", name, v, out, errs)
			}
			for _, h := range []string{"--help", "-h"} {
				code, out, errs := runCLI(t, "", name, v, h)
				text := out + errs
				if code != 0 || !strings.Contains(text, v) || strings.Contains(text, "unknown") {
					t.Errorf("%s %s %s: exit %d, printed:\n%s", name, v, h, code, text)
				}
			}
		}
		if name == "didcomm" && len(vs) != len(didcommVerbs) {
			t.Errorf("didcomm's summary names %v, its verbs are %d", vs, len(didcommVerbs))
		}
	}
}
