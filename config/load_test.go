package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"fleetmesh.org/fleetmesh/config/setting"
)

// TestDefaultRoundTrips checks that the file `fleetmesh init` writes loads
// back to exactly the defaults, and writes again the same.
func TestDefaultRoundTrips(t *testing.T) {
	def := Default()
	data, err := def.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, def) {
		t.Fatalf("loaded\n%+v\nwant the defaults\n%+v", got, def)
	}
	again, err := got.Encode()
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("written again differently (%v):\n%s", err, again)
	}
}

// TestOldFilesLoadTheSame loads files written before durations were typed:
// testdata/old-default.toml is what `fleetmesh init` wrote then, and
// testdata/every-key.toml sets every key away from its default, with
// every-key.golden.toml what the code of then wrote back after loading it.
func TestOldFilesLoadTheSame(t *testing.T) {
	got, err := Load(filepath.Join("testdata", "old-default.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// That file says listen = [] and mdns = false (the defaults then), so
	// an old home keeps listening on no mesh address and keeps mDNS off;
	// everything else is today's default.
	def := Default()
	def.Mesh.Listen = []string{}
	// It also writes out the defaults of then that changed since, which
	// such a home keeps.
	def.Relay.IPMaxSubscriptions, def.Relay.MaxNegRecords = 500, 500_000
	def.Mesh.MDNS = setting.Off
	if !reflect.DeepEqual(got, def) {
		t.Fatalf("old default file loaded as\n%+v\nwant\n%+v", got, def)
	}
	got, err = Load(filepath.Join("testdata", "every-key.toml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "every-key.golden.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// The comments above the keys came later (reference.go); the values
	// must be what the code of then wrote.
	data, want = uncommented(data), uncommented(want)
	// Keys whose spelling changed since, with the same meaning: mdns was
	// a boolean before it had 'auto'.
	want = bytes.Replace(want, []byte("mdns = true\n"), []byte("mdns = 'on'\n"), 1)
	if !bytes.Equal(data, want) {
		t.Fatalf("every-key.toml loaded and written as\n%s\nwant\n%s", data, want)
	}
}

// fileWith is a config file that sets key (a full key) to the TOML value v.
func fileWith(key, v string) string {
	table, name := "", key
	if i := strings.LastIndex(key, "."); i >= 0 {
		table, name = "["+key[:i]+"]\n", key[i+1:]
	}
	return fmt.Sprintf("%s%s = %s\n", table, name, v)
}

// TestBadValuesNameTheKey gives every duration key, written as a word or
// as a bare number, every switch key (auto, on, off) a word or a number,
// and every numeric key (sizes, counts, rates), written
// as a word, a bad value, and checks that loading fails naming the full key
// and, for a duration, the value and what is accepted. The keys come from
// the schema itself, so a new key is covered when it is declared.
func TestBadValuesNameTheKey(t *testing.T) {
	type bad struct{ key, value, want string }
	var cases []bad
	for _, k := range Keys() {
		key := k.Full()
		switch k.Kind() {
		case DurationValue:
			cases = append(cases,
				bad{key, "'soon'", `"soon": write a duration such as "30s" or "2m"`},
				bad{key, "60", `"60": write a duration such as "30s" or "2m"`},
				bad{key, "true", "write a duration"})
		case SwitchValue:
			cases = append(cases,
				bad{key, "'maybe'", `"maybe": write 'auto', 'on' or 'off'`},
				bad{key, "1", `"1": write 'auto', 'on' or 'off'`})
		case NumberValue:
			cases = append(cases, bad{key, "'lots'", "cannot decode TOML string"})
		case UnsignedValue:
			cases = append(cases, bad{key, "'lots'", "cannot decode TOML string"}, bad{key, "-1", "negative"})
		}
	}
	durations := 0
	for _, c := range cases {
		if strings.Contains(c.want, "duration") {
			durations++
		}
	}
	if durations < 3*15 {
		t.Fatalf("found %d duration cases: the schema walk lost keys", durations)
	}
	for _, c := range cases {
		t.Run(c.key+"="+c.value, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, []byte(fileWith(c.key, c.value)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatalf("loaded %s = %s", c.key, c.value)
			}
			msg := err.Error()
			if !strings.Contains(msg, ": "+c.key+": ") || !strings.Contains(msg, c.want) {
				t.Fatalf("error %q, want it to name %s and say %q", msg, c.key, c.want)
			}
		})
	}
}

// TestDurationRanges checks the range each duration key must fall in: the
// value parses, Validate refuses it, and the error names the key.
func TestDurationRanges(t *testing.T) {
	for _, tc := range []struct{ key, value string }{
		{"relay.first_message_timeout", "-1s"},
		{"mesh.sync_interval", "-1m"},
		{"mesh.maintain_interval", "-30s"},
		{"mesh.client_linger", "-5m"},
		{"mesh.lookup_grace", "-1s"},
		{"mesh.lookup_grace", "3s"},
		{"relay.lookup_timeout", "-2s"},
		{"relay.lookup_timeout", "2m"},
		{"mesh.reprovide_interval", "30s"},
		{"mesh.reprovide_interval", "48h"},
		{"mesh.storage_retention", "500ms"},
		{"mesh.relay_search_interval", "0s"},
		{"mesh.relay_limits.reservation_ttl", "0s"},
		{"mesh.relay_limits.circuit_duration", "-1m"},
		{"accounting.window", "1500ms"},
		{"accounting.window", "0s"},
		{"accounting.dispute_period", "-1h"},
		{"accounting.grant_length", "-1h"},
		{"accounting.grant_notice", "-1h"},
		{"dashboard.sample_interval", "10ms"},
	} {
		path := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(path, []byte(fileWith(tc.key, "'"+tc.value+"'")), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), tc.key+" "+tc.value) {
			t.Errorf("%s = %s: err %v, want one naming the key and value", tc.key, tc.value, err)
		}
	}
}

// uncommented is a TOML file without its comment lines.
func uncommented(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(l, []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// TestStoreBufferRange: a memtable over 1024 MiB and a negative block
// cache are refused, naming the key and the value; 0 takes the default.
func TestStoreBufferRange(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"store.memtable_mb", "0", true}, {"store.memtable_mb", "4", true}, {"store.memtable_mb", "1024", true},
		{"store.memtable_mb", "1025", false},
		{"store.cache_mb", "0", true}, {"store.cache_mb", "8", true}, {"store.cache_mb", "-1", false},
	} {
		path := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(path, []byte(fileWith(tc.key, tc.value)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.key+" "+tc.value)) {
			t.Errorf("%s = %s: err %v", tc.key, tc.value, err)
		}
	}
}

// TestNegativeNumbersNameTheKey gives every numeric key of the schema a
// negative value: each is refused, and the error names the key. The keys
// come from the schema, so a new key is covered when it is declared.
func TestNegativeNumbersNameTheKey(t *testing.T) {
	n := 0
	for _, k := range Keys() {
		if k.Kind() != NumberValue && k.Kind() != UnsignedValue {
			continue
		}
		n++
		t.Run(k.Full(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, []byte(fileWith(k.Full(), "-5")), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), k.Name) {
				t.Fatalf("%s = -5: err %v, want a refusal naming the key", k.Full(), err)
			}
		})
	}
	if n < 40 {
		t.Fatalf("found %d numeric keys: the schema walk lost keys", n)
	}
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, []byte(fileWith("relay.max_limit", "-5")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "relay.max_limit = -5: must be 0 or more") {
		t.Fatalf("max_limit = -5: %v", err)
	}
}
