package main

import (
	"strings"
	"testing"
)

// TestLabelUsage: label and why refuse what they cannot send, naming the
// flag and the fix, before asking the node anything.
func TestLabelUsage(t *testing.T) {
	home := t.TempDir()
	pk := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"label", "--home", home, "--author", pk}, "--reason is required"},
		{[]string{"label", "--home", home, "--author", pk, "--reason", "boring"}, `reason "boring": want one of spam`},
		{[]string{"label", "--home", home, "--author", pk, "--reason", "spam", "--expires", "-1h"}, "--expires -1h0m0s: give a positive duration"},
		{[]string{"label", "--home", home, "--author", pk, "--reason", "spam"}, "no running node at"},
		{[]string{"why", "--home", home}, "give --event ID, --author PUBKEY, --node DID or --held"},
		{[]string{"why", "--home", home, "--event", pk}, "no running node at"},
	} {
		code, _, errs := runCLI(t, "", tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}
