package dashboard

import (
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
)

// Config is the dashboard's settings: config.toml's [dashboard] section
// (package config embeds it), so each is declared here alone.
type Config struct {
	// Enabled serves /dashboard on the relay port (the node reads it).
	Enabled bool `toml:"enabled" comment:"serve /dashboard on the relay port"`
	// Token, if set, lets a request from a non-loopback address in when it
	// carries it (Authorization: Bearer TOKEN, or ?token=TOKEN once, which
	// sets a cookie); also through a reverse proxy. Empty: loopback only.
	// It is a credential: keep config.toml private.
	Token string `toml:"token" comment:"lets non-loopback requests in with it (Bearer or ?token=); '' is loopback only"`
	// SampleInterval is how often the metrics are sampled (0: 10 s). The
	// hour window keeps 360 samples at most.
	SampleInterval setting.Duration `toml:"sample_interval" comment:"how often the dashboard samples the metrics"`
}

// minSampleInterval keeps sampling from costing the node more than
// serving it: every sample gathers every metric.
const minSampleInterval = 100 * time.Millisecond

// DefaultConfig is the settings a new node starts with.
func DefaultConfig() Config {
	return Config{Enabled: true, SampleInterval: setting.DurationOf(10 * time.Second)}
}

// Check refuses a sample interval too short to be meant, naming the key.
func (c *Config) Check() error {
	if d := c.SampleInterval.Duration; d != 0 && d < minSampleInterval {
		return fmt.Errorf("sample_interval %s: write a duration of at least 100ms, e.g. \"10s\" (0 takes the default)", c.SampleInterval)
	}
	return nil
}
