package label

import (
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
)

// Actions a policy takes on what labels past its threshold name.
const (
	// ActionCount only counts: a verdict is in the metrics and in `fleetmesh
	// why`, nothing is refused. The default.
	ActionCount = "count"
	// ActionHold accepts and stores the event but lists it for the
	// operator's review (Policy.Held).
	ActionHold = "hold"
	// ActionRefuse answers the event `OK false` with `blocked:`.
	ActionRefuse = "refuse"
)

// Config is the [labels] section of config.toml (package config embeds
// it). spec/labels.md says what each does.
type Config struct {
	// Policy is what this node does with an author, event or blob whose
	// labels pass Threshold: count, hold or refuse.
	Policy string `toml:"policy" comment:"what to do with what labels past the threshold name: \"count\" (only count), \"hold\" (keep for review) or \"refuse\" (OK false, blocked:)"`
	// Threshold is the sum of the standing, here, of the distinct
	// labellers of a target at or past which the policy acts.
	Threshold float64 `toml:"threshold" comment:"sum of the labellers' standing here at which the policy acts on a target"`
	// MinStanding is the standing below which a labeller's labels weigh
	// nothing: the Sybils behind one node share at most beta of its
	// standing, so each of many holds far less than this.
	MinStanding float64 `toml:"min_standing" comment:"standing below which a labeller's labels weigh nothing (a Sybil among many behind one node holds far less)"`
	// Reporters are the Nostr keys (64 hex) whose NIP-56 reports (kind
	// 1984) count; reports from any other key count for nothing.
	Reporters []string `toml:"reporters" comment:"Nostr pubkeys (hex) whose NIP-56 reports (kind 1984) count here; none by default"`
	// ReporterWeight is what one listed reporter's report adds to a
	// target's sum, in standing.
	ReporterWeight float64 `toml:"reporter_weight" comment:"what one listed reporter's report adds to a target's sum, in standing"`
	// MaxPerLabeller bounds the labels (and listed reporters' reports)
	// kept from one labeller.
	MaxPerLabeller int `toml:"max_per_labeller" comment:"labels kept from one labeller (or listed reporter) at most"`
	// MaxLabels bounds the labels kept in all.
	MaxLabels int `toml:"max_labels" comment:"labels kept in all, at most; when full, a new label evicts the oldest from a labeller without standing"`
	// MaxHeld bounds the events listed for review under policy hold.
	MaxHeld int `toml:"max_held" comment:"events listed for review under policy \"hold\", and refusals remembered for fleetmesh why, at most each (the oldest leave first)"`
	// Sweep is how often expired labels are dropped.
	Sweep setting.Duration `toml:"sweep" comment:"how often expired labels are dropped"`
}

// DefaultConfig is the settings a new node starts with: count, never
// refuse (spec/labels.md "Policy").
func DefaultConfig() Config {
	return Config{Policy: ActionCount, Threshold: DefaultThreshold, MinStanding: DefaultMinStanding, Reporters: []string{}, ReporterWeight: DefaultThreshold,
		MaxPerLabeller: 10_000, MaxLabels: 1_000_000, MaxHeld: 10_000, Sweep: setting.DurationOf(time.Minute)}
}

// DefaultThreshold and DefaultMinStanding are the defaults of Threshold
// and MinStanding, measured on the standing issue's 10,000-node graph
// with 10,000 walks (label/sim_test.go, docs/benchmarks/labels.md): the
// top quarter of an honest node's view starts at about 0.0003 (three
// walks in 10,000), so three honest labellers from it pass the
// threshold at every honest node observed; a thousand Sybils behind one
// node share at most beta (0.05) of its standing, about 0.000001 each
// even at the attacker's own counterparty, and never weigh anything.
const (
	DefaultThreshold   = 0.0006
	DefaultMinStanding = 0.0002
)

// Check refuses settings the policy cannot run with, naming the key.
func (c *Config) Check() error {
	switch {
	case c.Policy != ActionCount && c.Policy != ActionHold && c.Policy != ActionRefuse:
		return fmt.Errorf("policy %q: want \"count\", \"hold\" or \"refuse\"", c.Policy)
	case !(c.Threshold > 0):
		return fmt.Errorf("threshold %v: must be above 0, e.g. %v", c.Threshold, DefaultThreshold)
	case c.MinStanding < 0 || c.MinStanding > 1:
		return fmt.Errorf("min_standing %v: must be from 0 to 1, e.g. %v", c.MinStanding, DefaultMinStanding)
	case c.ReporterWeight < 0:
		return fmt.Errorf("reporter_weight %v: must be 0 or more", c.ReporterWeight)
	case c.MaxPerLabeller < 1:
		return fmt.Errorf("max_per_labeller %d: must be at least 1", c.MaxPerLabeller)
	case c.MaxLabels < 1 || c.MaxLabels > 100_000_000:
		return fmt.Errorf("max_labels %d: must be from 1 to 100000000", c.MaxLabels)
	case c.MaxHeld < 0:
		return fmt.Errorf("max_held %d: must be 0 or more", c.MaxHeld)
	case c.Sweep.Duration < time.Second:
		return fmt.Errorf("sweep %s: write a duration of at least 1s, e.g. \"1m\"", c.Sweep)
	}
	for i, r := range c.Reporters {
		if len(r) != 64 || !isLowerHex(r) {
			return fmt.Errorf("reporters[%d] %q: want a Nostr pubkey as 64 lowercase hex digits (not npub)", i, r)
		}
	}
	return nil
}
