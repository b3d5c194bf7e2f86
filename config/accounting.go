package config

import (
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
)

// AccountingConfig is the [accounting] section: windows, receipts,
// disputes and grants (spec/receipts.md, spec/grants.md,
// spec/disputes.md).
type AccountingConfig struct {
	// Window is the accounting window, UTC-aligned: any Go duration of
	// whole seconds ("1h"; seconds in tests).
	Window setting.Duration `toml:"window"`
	// Tolerance is how far two sides' counts of a service may differ, as
	// a fraction of the larger, and still be signed.
	Tolerance float64 `toml:"tolerance"`
	// Slack is how many events (with their bytes) the sides may differ
	// by whatever the tolerance: events in flight at a window boundary
	// fall in one window at the sender and the next at the receiver.
	Slack uint64 `toml:"slack"`
	// DisputePeriod is how long after a window's end its exchange may go
	// on before the window is reported (0, or "" as older files have it:
	// one window).
	DisputePeriod setting.Duration `toml:"dispute_period"`
	// DisputeRounds bounds the proposals of one window.
	DisputeRounds int `toml:"dispute_rounds"`
	// RequireGrant lists services this node gives only under a grant
	// (events, bytes, …).
	RequireGrant []string `toml:"require_grant"`
	// AcceptGrants accepts the grants other nodes offer this one.
	AcceptGrants bool `toml:"accept_grants"`
	// OfferEvents is the default quota (events per window) of
	// `fleetmesh grants offer`; GrantLength and GrantNotice its default
	// length and revocation notice.
	OfferEvents uint64           `toml:"offer_events"`
	GrantLength setting.Duration `toml:"grant_length"`
	GrantNotice setting.Duration `toml:"grant_notice"`
}

// DefaultAccounting is the [accounting] a new node starts with.
func DefaultAccounting() AccountingConfig {
	return AccountingConfig{Window: setting.DurationOf(time.Hour), Tolerance: 0.02, Slack: 2, DisputeRounds: 3, RequireGrant: []string{},
		AcceptGrants: true, OfferEvents: 100_000, GrantLength: setting.DurationOf(720 * time.Hour), GrantNotice: setting.DurationOf(time.Hour)}
}

func (a AccountingConfig) validate() error {
	if d := a.Window.Duration; d < time.Second || d%time.Second != 0 {
		return fmt.Errorf("accounting.window %s: write a whole number of seconds of at least 1s, e.g. \"1h\" or \"5s\"", a.Window)
	}
	if a.Tolerance < 0 || a.Tolerance >= 1 {
		return fmt.Errorf("accounting.tolerance %v: must be from 0 to below 1 (a fraction, e.g. 0.02)", a.Tolerance)
	}
	for _, k := range []struct {
		name string
		v    setting.Duration
	}{{"dispute_period", a.DisputePeriod}, {"grant_length", a.GrantLength}, {"grant_notice", a.GrantNotice}} {
		if k.v.Duration < 0 {
			return fmt.Errorf("accounting.%s %s: write a duration of 0 or more, e.g. \"1h\"", k.name, k.v)
		}
	}
	if a.DisputeRounds < 0 {
		return fmt.Errorf("accounting.dispute_rounds %d: must be >= 0 (0 = 3)", a.DisputeRounds)
	}
	for _, s := range a.RequireGrant {
		switch s {
		case "events", "bytes", "storage_bytes", "circuit_seconds", "circuit_bytes", "mediation_messages", "compute_units":
		default:
			return fmt.Errorf("accounting.require_grant: unknown service %q (events, bytes, storage_bytes, circuit_seconds, circuit_bytes, mediation_messages, compute_units)", s)
		}
	}
	return nil
}
