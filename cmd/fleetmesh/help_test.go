package main

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

// flagLine is a flag's line in -h output: the flag and its placeholder.
var flagLine = regexp.MustCompile(`(?m)^  -(\S+)(?: (.+))?$`)

// TestEveryCommandHasHelp runs -h for every command and verb: each prints
// a one-line description, an example that uses the command, and flags
// whose placeholders are single upper-case or lower-case words (Go's flag
// package takes the first back-quoted word of a usage as the placeholder,
// so a back-quoted command name would read `-join fleetmesh invite`).
func TestEveryCommandHasHelp(t *testing.T) {
	var names []string
	for n := range commands {
		switch n {
		case "didcomm":
			for v := range didcommVerbs {
				names = append(names, "didcomm "+v)
			}
		case "grants":
			for v := range grantsVerbs {
				names = append(names, "grants "+v)
			}
		case "store":
			for v := range storeVerbs {
				names = append(names, "store "+v)
			}
		default:
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append(strings.Fields(name), "-h")...)
			out := stdout + stderr
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			if s := helpSummary(name); s == "" || !strings.Contains(out, strings.ToUpper(s[:1])+s[1:]+"\n") && !strings.Contains(out, "In short: "+s+".\n") {
				t.Errorf("no description:\n%s", out)
			}
			ex := helpExamples[name]
			if !strings.HasPrefix(ex, "fleetmesh "+name) && !strings.Contains(ex, "| fleetmesh "+name) || !strings.Contains(out, "Example:\n  "+ex+"\n") {
				t.Errorf("no example of fleetmesh %s:\n%s", name, out)
			}
			for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
				if ph := m[2]; ph != "" && (strings.Contains(ph, " ") || strings.Contains(ph, "fleetmesh")) {
					t.Errorf("-%s has placeholder %q", m[1], ph)
				}
			}
		})
	}
	for name := range helpExamples {
		if helpSummary(name) == "" {
			t.Errorf("an example for %q, which is no command or verb", name)
		}
	}
}
