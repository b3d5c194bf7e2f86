package main

import (
	"strings"
	"testing"
)

// TestGrantsOfferNeedsQuota: a service other than events has no default
// quota, so an offer without --quota says so instead of taking the events
// default; an unknown service is named.
func TestGrantsOfferNeedsQuota(t *testing.T) {
	home := t.TempDir()
	to := "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--service", "storage_bytes"}, "--service storage_bytes needs --quota N"},
		{[]string{"--service", "mediation_messages"}, "--service mediation_messages needs --quota N"},
		{[]string{"--service", "disk"}, `--service "disk": one of events, bytes`},
	} {
		code, _, errs := runCLI(t, "", append([]string{"grants", "offer", "--home", home, "--to", to}, c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Fatalf("%v: exit %d, stderr %q; want %q", c.args, code, errs, c.want)
		}
	}
}
