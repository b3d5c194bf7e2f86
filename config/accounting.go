package config

import (
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/config/setting"
)

// AccountingConfig is the [accounting] section: windows, receipts,
// disputes and grants (spec/receipts.md, spec/grants.md,
// spec/disputes.md). The accounting service's settings are its own
// Config; the rest are the defaults of `fleetmesh grants offer`.
type AccountingConfig struct {
	accounting.Config
	// OfferEvents is the default quota (events per window) of
	// `fleetmesh grants offer`; GrantLength and GrantNotice its default
	// length and revocation notice.
	OfferEvents uint64           `toml:"offer_events" comment:"default quota (events per window) of fleetmesh grants offer"`
	GrantLength setting.Duration `toml:"grant_length" comment:"default length of a grant that fleetmesh grants offer makes"`
	GrantNotice setting.Duration `toml:"grant_notice" comment:"default notice a revocation of such a grant gives"`
}

// DefaultAccounting is the [accounting] a new node starts with.
func DefaultAccounting() AccountingConfig {
	return AccountingConfig{Config: accounting.DefaultConfig(), OfferEvents: 100_000,
		GrantLength: setting.DurationOf(720 * time.Hour), GrantNotice: setting.DurationOf(time.Hour)}
}

func (a AccountingConfig) validate() error {
	if err := a.Check(); err != nil {
		return fmt.Errorf("accounting.%w", err)
	}
	for _, k := range []struct {
		name string
		v    setting.Duration
	}{{"grant_length", a.GrantLength}, {"grant_notice", a.GrantNotice}} {
		if k.v.Duration < 0 {
			return fmt.Errorf("accounting.%s %s: write a duration of 0 or more, e.g. \"1h\"", k.name, k.v)
		}
	}
	return nil
}
