// Package setting holds the value types of config.toml that Go's types do
// not spell the way an operator writes them: a Duration written "30s" or
// "2m", a Switch written "auto", "on" or "off". Each parses at load, when go-toml decodes the file, so a value is
// checked once and the packages that take it hold it typed.
//
// It is a package of its own, apart from package config, because the
// packages whose settings are a section of the file (relay's [relay], for
// one) declare their Config with these types, and package config imports
// them: they cannot import config back. It holds value types and what
// reporting their errors needs (NonTextKey), not keys, defaults or rules;
// those stay with the package the setting is for.
package setting

import (
	"fmt"
	"time"
)

// Duration is a duration setting, written in the file as a Go duration
// string ("30s", "2m", "22h"). It encodes back in the shortest whole unit
// ("1m", not "1m0s"), so a written config.toml reads as a person would
// write it. An empty string is zero, as an unset value was before
// durations were typed.
type Duration struct {
	time.Duration
}

// DurationOf is d as a setting.
func DurationOf(d time.Duration) Duration { return Duration{Duration: d} }

// DurationError is a value that is not a duration. Package config adds the
// key it was written at.
type DurationError struct {
	Text string
}

// Error says what was written and what is accepted.
func (e *DurationError) Error() string {
	return fmt.Sprintf("%q: write a duration such as \"30s\" or \"2m\" (units ns, us, ms, s, m, h)", e.Text)
}

// UnmarshalText parses a Go duration string; "" is zero.
func (d *Duration) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		d.Duration = 0
		return nil
	}
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return &DurationError{Text: string(b)}
	}
	d.Duration = v
	return nil
}

// MarshalText writes d as String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String is d in its largest whole unit ("1m", "2160h", "1500ms"), or as
// time.Duration writes it when no unit divides it.
func (d Duration) String() string {
	v := d.Duration
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if v%u.unit == 0 && v != 0 {
			return fmt.Sprintf("%d%s", v/u.unit, u.name)
		}
	}
	return v.String()
}

// Switch is a setting that is on, off, or left to the node ("auto"), which
// decides from what else it knows (its class, say). Written 'auto', 'on'
// or 'off'; true and false are read as on and off, so a key that was a
// boolean before it had an "auto" keeps loading from older files. It is a
// struct, not a string type, so that go-toml hands every value to
// UnmarshalText: it stores a TOML string into a string type unchecked.
// The zero Switch is Auto.
type Switch struct {
	word string
}

// The values of a Switch.
var (
	Auto = Switch{"auto"}
	On   = Switch{"on"}
	Off  = Switch{"off"}
)

// String is the switch's word.
func (s Switch) String() string {
	if s.word == "" {
		return Auto.word
	}
	return s.word
}

// SwitchError is a value that is not a Switch. Package config adds the key
// it was written at.
type SwitchError struct {
	Text string
}

// Error says what was written and what is accepted.
func (e *SwitchError) Error() string {
	return fmt.Sprintf("%q: write 'auto', 'on' or 'off' (or true or false)", e.Text)
}

// UnmarshalText reads auto, on, off, true or false.
func (s *Switch) UnmarshalText(b []byte) error {
	switch string(b) {
	case "auto":
		*s = Auto
	case "on", "true":
		*s = On
	case "off", "false":
		*s = Off
	default:
		return &SwitchError{Text: string(b)}
	}
	return nil
}

// MarshalText writes the switch's word.
func (s Switch) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
