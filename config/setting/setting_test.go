package setting

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestDurationText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		out  string
	}{
		{"1m", time.Minute, "1m"},
		{"30s", 30 * time.Second, "30s"},
		{"2160h", 2160 * time.Hour, "2160h"},
		{"90m", 90 * time.Minute, "90m"},
		{"1h30m", 90 * time.Minute, "90m"},
		{"1500ms", 1500 * time.Millisecond, "1500ms"},
		{"0s", 0, "0s"},
		{"", 0, "0s"},
		{"-2m", -2 * time.Minute, "-2m"},
		{"1.5us", 1500 * time.Nanosecond, "1.5µs"},
	} {
		var d Duration
		if err := d.UnmarshalText([]byte(tc.in)); err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if d.Duration != tc.want || d.String() != tc.out {
			t.Errorf("%q: got %v written %q, want %v written %q", tc.in, d.Duration, d, tc.want, tc.out)
		}
	}
	for _, bad := range []string{"soon", "5", "1 m", "true", "1d"} {
		var d Duration
		err := d.UnmarshalText([]byte(bad))
		var de *DurationError
		if !errors.As(err, &de) || de.Text != bad {
			t.Errorf("%q: err = %v, want a DurationError naming it", bad, err)
		}
	}
}

// FuzzDurationText checks that whatever UnmarshalText accepts, MarshalText
// writes back as text that parses to the same duration.
func FuzzDurationText(f *testing.F) {
	for _, s := range []string{"1m", "30s", "", "0s", "-1h", "1.5us", "soon", "9223372036854775807ns", "1h2m3.5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var d Duration
		if err := d.UnmarshalText([]byte(s)); err != nil {
			return
		}
		b, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := back.UnmarshalText(b); err != nil || back != d {
			t.Fatalf("%q parsed to %v, written %q, read back %v (%v)", s, d.Duration, b, back.Duration, err)
		}
	})
}

func TestNonTextKey(t *testing.T) {
	type limits struct {
		TTL Duration `toml:"ttl"`
	}
	type inner struct {
		Every  Duration `toml:"every"`
		Limits limits   `toml:"limits"`
	}
	type embedded struct {
		Wait Duration `toml:"wait"`
	}
	type schema struct {
		Top  Duration `toml:"top"`
		Mesh inner    `toml:"mesh"`
		MDNS Switch   `toml:"mdns"`
		Sect struct {
			embedded
			Name string `toml:"name"`
		} `toml:"sect"`
	}
	for _, tc := range []struct{ doc, want string }{
		{"top = 5\n", "top"},
		{"[mesh]\nevery = 60\n", "mesh.every"},
		{"[mesh.limits]\nttl = true\n", "mesh.limits.ttl"},
		{"[sect]\nwait = 1.5\n", "sect.wait"},
		{"[mesh]\nevery = '1m'\n[sect]\nname = 'x'\nwait = 3\n", "sect.wait"},
		{"[mesh]\nevery = '1m'\n", ""},
		{"not toml [", ""},
		{"mdns = false\n", ""},
		{"mdns = 'auto'\n", ""},
		{"mdns = 1\n", "mdns"},
	} {
		if got := NonTextKey([]byte(tc.doc), reflect.TypeFor[schema]()); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.doc, got, tc.want)
		}
	}
}

func TestSwitchText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Switch
	}{
		{"auto", Auto}, {"on", On}, {"off", Off},
		// Older files wrote the key as a boolean.
		{"true", On}, {"false", Off},
	} {
		var s Switch
		if err := s.UnmarshalText([]byte(tc.in)); err != nil || s != tc.want {
			t.Errorf("%q: got %v, %v; want %v", tc.in, s, err, tc.want)
		}
		if b, _ := s.MarshalText(); string(b) != tc.want.String() {
			t.Errorf("%q written as %q", tc.in, b)
		}
	}
	if b, _ := (Switch{}).MarshalText(); string(b) != "auto" {
		t.Errorf("the zero Switch is written %q, want auto", b)
	}
	for _, bad := range []string{"", "On", "yes", "1", "maybe"} {
		var s Switch
		err := s.UnmarshalText([]byte(bad))
		var se *SwitchError
		if !errors.As(err, &se) || se.Text != bad {
			t.Errorf("%q: err = %v, want a SwitchError naming it", bad, err)
		}
	}
}

// FuzzSwitchText checks that whatever UnmarshalText accepts, MarshalText
// writes back as text that parses to the same switch.
func FuzzSwitchText(f *testing.F) {
	for _, s := range []string{"auto", "on", "off", "true", "false", "", "yes"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v Switch
		if err := v.UnmarshalText([]byte(s)); err != nil {
			return
		}
		b, err := v.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Switch
		if err := back.UnmarshalText(b); err != nil || back != v {
			t.Fatalf("%q parsed to %v, written %q, read back %v (%v)", s, v, b, back, err)
		}
	})
}
