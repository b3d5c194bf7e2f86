package standing

import (
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
)

// Config is the [standing] section of config.toml (package config
// embeds it): every parameter of the walks and the scoring, declared here
// alone. spec/standing.md says what each does to the measure.
type Config struct {
	// Alpha is the walk's continuation probability (MeritRank's
	// transitivity decay): at each node a walk takes one more step with
	// probability Alpha and stops otherwise, so trust fades with distance.
	Alpha float64 `toml:"alpha" comment:"walk continuation probability: trust fades with each hop (0 < alpha < 1)"`
	// Beta is the connectivity (bottleneck) decay: all the nodes reached
	// mostly through one node u (a Sybil region off its attacker, a phone
	// off its home) together take through u at most Beta times u's own
	// standing (spec/standing.md "Score"). 0 cuts them off entirely.
	Beta float64 `toml:"beta" comment:"what nodes reached through one bottleneck node take through it, at most, as a fraction of its standing"`
	// Walks is how many walks start at this node.
	Walks int `toml:"walks" comment:"random walks kept, all starting at this node"`
	// MaxSteps bounds one walk's length whatever Alpha.
	MaxSteps int `toml:"max_steps" comment:"steps one walk takes at most"`
	// Epoch is the length of one epoch of the epoch decay.
	Epoch setting.Duration `toml:"epoch" comment:"length of one epoch of the epoch decay"`
	// EpochDecay is what one epoch multiplies the weight of older
	// service by, relative to newer: service k epochs old weighs
	// EpochDecay^k.
	EpochDecay float64 `toml:"epoch_decay" comment:"weight of service one epoch older, relative (0 < epoch_decay <= 1)"`
	// MinUnits drops an edge, at a full recomputation, once its decayed
	// weight falls below it: old service fades out entirely.
	MinUnits float64 `toml:"min_units" comment:"an edge whose decayed service falls below this many units is dropped"`
	// DisputeEpochs is how many epochs a window this node reported
	// disputed keeps its counterparty a wall.
	DisputeEpochs int `toml:"dispute_epochs" comment:"epochs an unresolved dispute keeps the counterparty a wall to walks"`
	// Recompute is how often the walks are drawn afresh; in between they
	// are repaired as receipts arrive.
	Recompute setting.Duration `toml:"recompute" comment:"how often all walks are drawn afresh (repaired incrementally in between)"`
	// Trusted is the standing at or above which a node counts as
	// trusted (Trusted, spec/standing.md "Use").
	Trusted float64 `toml:"trusted" comment:"standing at or above which a node counts as trusted by the services"`
	// AnchorWindows is how many verified windows with trusted
	// counterparties a declared anchor needs before its class counts.
	AnchorWindows int `toml:"anchor_windows" comment:"verified windows with trusted counterparties a declared anchor needs"`
}

// DefaultConfig is the settings a new node starts with.
func DefaultConfig() Config {
	return Config{Alpha: 0.85, Beta: 0.05, Walks: 10_000, MaxSteps: 256,
		Epoch: setting.DurationOf(24 * time.Hour), EpochDecay: 0.9, MinUnits: 1,
		DisputeEpochs: 7, Recompute: setting.DurationOf(time.Hour), Trusted: 0.001, AnchorWindows: 168}
}

// Check refuses settings the walks cannot run with, naming the key.
func (c *Config) Check() error {
	switch {
	case !(c.Alpha > 0 && c.Alpha < 1):
		return fmt.Errorf("alpha %v: must be above 0 and below 1, e.g. 0.85", c.Alpha)
	case c.Beta < 0 || c.Beta > 1:
		return fmt.Errorf("beta %v: must be from 0 (cut off whatever hangs off one node) to 1, e.g. 0.05", c.Beta)
	case c.Walks < 1 || c.Walks > 10_000_000:
		return fmt.Errorf("walks %d: must be from 1 to 10000000", c.Walks)
	case c.MaxSteps < 1 || c.MaxSteps > 1<<16:
		return fmt.Errorf("max_steps %d: must be from 1 to 65536", c.MaxSteps)
	case c.Epoch.Duration < time.Second || c.Epoch.Duration%time.Second != 0:
		return fmt.Errorf("epoch %s: write a whole number of seconds of at least 1s, e.g. \"24h\"", c.Epoch)
	case !(c.EpochDecay > 0 && c.EpochDecay <= 1):
		return fmt.Errorf("epoch_decay %v: must be above 0 and at most 1, e.g. 0.9", c.EpochDecay)
	case c.MinUnits < 0:
		return fmt.Errorf("min_units %v: must be 0 or more", c.MinUnits)
	case c.DisputeEpochs < 0:
		return fmt.Errorf("dispute_epochs %d: must be 0 or more", c.DisputeEpochs)
	case c.Recompute.Duration < time.Second:
		return fmt.Errorf("recompute %s: write a duration of at least 1s, e.g. \"1h\"", c.Recompute)
	case c.Trusted < 0 || c.Trusted > 1:
		return fmt.Errorf("trusted %v: must be from 0 to 1", c.Trusted)
	case c.AnchorWindows < 0:
		return fmt.Errorf("anchor_windows %d: must be 0 or more", c.AnchorWindows)
	}
	return nil
}
