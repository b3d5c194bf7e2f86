package compute

import (
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
)

// FuelPerUnit is how much fuel one compute unit is: what a job's fuel
// counts for in the meter and so in receipts (meter.ComputeUnits). It is
// part of the protocol, not a setting: both sides of a receipt must
// count the same units for the same run.
const FuelPerUnit = 10_000

// Units is the compute units a run that burnt fuel counts for: fuel /
// FuelPerUnit, rounded up, at least 1 (a run that started costs a unit).
func Units(fuel uint64) uint64 { return max(1, (fuel+FuelPerUnit-1)/FuelPerUnit) }

// Config is the [compute] section of config.toml (package config embeds
// it): whether this node executes jobs for others and the bounds it
// holds them to, and what the jobs it requests ask for.
type Config struct {
	// Offer makes the node an executor for other nodes. Off by default:
	// running strangers' programs spends the operator's CPU and memory,
	// which an operator should choose (docs/operators.md "Compute").
	Offer bool `toml:"offer" comment:"execute WebAssembly jobs for other nodes (off by default: it spends this machine's CPU and memory on strangers' programs)"`
	// Concurrency is how many jobs this node runs at once as an
	// executor; more are declined as busy.
	Concurrency int `toml:"concurrency" comment:"jobs run at once for others; more are declined as busy"`
	// MaxFuel, MaxMemoryPages, MaxOutputBytes, MaxCallDepth and
	// MaxDeadline bound any job this node runs; an offer past any is
	// declined. MaxModuleBytes and MaxInputBytes bound what it takes in.
	MaxFuel        uint64           `toml:"max_fuel" comment:"most fuel one job may burn here"`
	MaxMemoryPages uint32           `toml:"max_memory_pages" comment:"most 64 KiB pages of memory one job may use here"`
	MaxOutputBytes uint32           `toml:"max_output_bytes" comment:"most bytes of output one job may write here"`
	MaxCallDepth   uint32           `toml:"max_call_depth" comment:"deepest call stack one job may reach here"`
	MaxDeadline    setting.Duration `toml:"max_deadline" comment:"longest wall-clock time one job may run here"`
	MaxModuleBytes int              `toml:"max_module_bytes" comment:"largest module taken in"`
	MaxInputBytes  int              `toml:"max_input_bytes" comment:"largest job input taken in"`
	// Redundancy is the least number of executors a job this node
	// requests runs on when `fleetmesh job run` names none; the
	// verification (package compute/verify) adds a seasoned executor
	// beside new identities and audits at random on top of it.
	Redundancy int `toml:"redundancy" comment:"least executors a job requested here runs on when job run names none (verification adds more and audits as needed)"`
	// NIP90 has the node answer NIP-90 job requests (kinds 5970, 5400
	// and the fleetmesh WebAssembly kind) that clients publish to its
	// relay, signing with a Nostr key of its own (compute/nip90).
	NIP90 bool `toml:"nip90" comment:"answer NIP-90 job requests (5970 proof of work, 5400 count, 5990 WebAssembly) published to this relay"`
	// JobTimeout bounds one requested job from offer to verdict.
	JobTimeout setting.Duration `toml:"job_timeout" comment:"longest a requested job may take, from offer to verdict"`
}

// DefaultConfig is the settings a new node starts with.
func DefaultConfig() Config {
	return Config{
		Concurrency:    2,
		MaxFuel:        1_000_000_000,
		MaxMemoryPages: 256,
		MaxOutputBytes: 64 << 10,
		MaxCallDepth:   1000,
		MaxDeadline:    setting.DurationOf(10 * time.Second),
		MaxModuleBytes: MaxModuleBytes,
		MaxInputBytes:  64 << 10,
		Redundancy:     1,
		JobTimeout:     setting.DurationOf(time.Minute),
	}
}

// Limits is the most this node lets a job use, as job limits.
func (c *Config) Limits() Limits {
	return Limits{Fuel: c.MaxFuel, MemoryPages: c.MaxMemoryPages, OutputBytes: c.MaxOutputBytes,
		CallDepth: c.MaxCallDepth, DeadlineMS: uint32(c.MaxDeadline.Milliseconds())}
}

// Check refuses settings outside the protocol's bounds, naming the key.
func (c *Config) Check() error {
	switch {
	case c.Concurrency < 1 || c.Concurrency > 1024:
		return fmt.Errorf("concurrency %d: must be from 1 to 1024", c.Concurrency)
	case c.MaxFuel == 0:
		return fmt.Errorf("max_fuel: must be above 0, e.g. 1000000000")
	case c.MaxMemoryPages == 0 || c.MaxMemoryPages > MaxMemoryPages:
		return fmt.Errorf("max_memory_pages %d: must be from 1 to %d", c.MaxMemoryPages, MaxMemoryPages)
	case c.MaxOutputBytes > MaxOutputBytes:
		return fmt.Errorf("max_output_bytes %d: at most %d", c.MaxOutputBytes, MaxOutputBytes)
	case c.MaxCallDepth == 0 || c.MaxCallDepth > MaxCallDepth:
		return fmt.Errorf("max_call_depth %d: must be from 1 to %d", c.MaxCallDepth, MaxCallDepth)
	case c.MaxDeadline.Duration < time.Millisecond || c.MaxDeadline.Milliseconds() > MaxDeadlineMS:
		return fmt.Errorf("max_deadline %s: must be from 1ms to %s", c.MaxDeadline, time.Duration(MaxDeadlineMS)*time.Millisecond)
	case c.MaxModuleBytes < 8 || c.MaxModuleBytes > MaxModuleBytes:
		return fmt.Errorf("max_module_bytes %d: must be from 8 to %d", c.MaxModuleBytes, MaxModuleBytes)
	case c.MaxInputBytes < 0 || c.MaxInputBytes > MaxInputBytes:
		return fmt.Errorf("max_input_bytes %d: must be from 0 to %d", c.MaxInputBytes, MaxInputBytes)
	case c.Redundancy < 1 || c.Redundancy > MaxRedundancy:
		return fmt.Errorf("redundancy %d: must be from 1 to %d", c.Redundancy, MaxRedundancy)
	case c.JobTimeout.Duration < time.Second:
		return fmt.Errorf("job_timeout %s: at least 1s, e.g. \"1m\"", c.JobTimeout)
	}
	return nil
}
