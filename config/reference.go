package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"fleetmesh.org/fleetmesh/config/setting"
)

// Key is one setting of config.toml as the reference lists it.
type Key struct {
	Table   string // "" for the top level, else "relay", "mesh.relay_limits", …
	Name    string
	Default string // as TOML writes it
	Comment string // the one-line comment config.toml carries above it

	typ reflect.Type // the field's Go type
}

// Full is the key with its table: "mesh.relay_limits.circuit_bytes".
func (k Key) Full() string {
	if k.Table == "" {
		return k.Name
	}
	return k.Table + "." + k.Name
}

// ValueKind is the kind of value a key takes, for tests and tools that
// give every key of one kind a value.
type ValueKind int

// The kinds of value Key.Kind tells apart.
const (
	// OtherValue is text, a boolean or a list.
	OtherValue ValueKind = iota
	// DurationValue is a duration written as text ("30s"), parsed at load.
	DurationValue
	// NumberValue is an integer or a float: a size, a count or a rate.
	NumberValue
	// UnsignedValue is a NumberValue that cannot be negative.
	UnsignedValue
	// SwitchValue is 'auto', 'on' or 'off' (setting.Switch).
	SwitchValue
)

var (
	durationType = reflect.TypeFor[setting.Duration]()
	switchType   = reflect.TypeFor[setting.Switch]()
)

// Kind says which kind of value k takes.
func (k Key) Kind() ValueKind {
	switch kind := k.typ.Kind(); {
	case k.typ == durationType:
		return DurationValue
	case k.typ == switchType:
		return SwitchValue
	case kind >= reflect.Uint && kind <= reflect.Uint64:
		return UnsignedValue
	case kind >= reflect.Int && kind <= reflect.Float64:
		return NumberValue
	}
	return OtherValue
}

// Keys lists every setting of config.toml in file order, with its default
// and its comment: what `fleetmesh init` writes and docs/config.md shows,
// both from the same struct tags, so they cannot drift.
func Keys() []Key {
	var out []Key
	walkKeys(reflect.ValueOf(Default()), "", &out)
	return out
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

// isTable reports whether a field of type t is written as a TOML table.
func isTable(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !t.Implements(textMarshaler) && !reflect.PointerTo(t).Implements(textMarshaler)
}

func walkKeys(v reflect.Value, table string, out *[]Key) {
	t := v.Type()
	var tables []func()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		switch {
		case !f.IsExported() || name == "-":
		case f.Anonymous && name == "":
			walkKeys(v.Field(i), table, out)
		case isTable(f.Type):
			sub := name
			if table != "" {
				sub = table + "." + name
			}
			fv := v.Field(i)
			// TOML writes a table's keys after its parent's plain keys.
			tables = append(tables, func() { walkKeys(fv, sub, out) })
		default:
			*out = append(*out, Key{Table: table, Name: name, Default: tomlValue(v.Field(i)), Comment: f.Tag.Get("comment"), typ: f.Type})
		}
	}
	for _, fn := range tables {
		fn()
	}
}

// tomlValue is v as it stands on the right of `key = ` in config.toml.
func tomlValue(v reflect.Value) string {
	b, err := toml.Marshal(map[string]any{"v": v.Interface()})
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return strings.TrimSpace(strings.TrimPrefix(string(b), "v = "))
}

// Reference is docs/config.md: every key of config.toml by table, with
// its default and what it does.
func Reference() string {
	var b strings.Builder
	b.WriteString("# config.toml reference\n\n")
	b.WriteString("Every key of a node's `config.toml`, with the default `fleetmesh init` writes\n")
	b.WriteString("and the comment it writes above it. Generated from the configuration's\n")
	b.WriteString("struct tags (`config.Keys`); `go test ./config -run TestReference -update`\n")
	b.WriteString("rewrites it, and the test fails when it is stale. Durations are Go\n")
	b.WriteString("durations (\"30s\", \"5m\", \"22h\"); a bad value stops `fleetmesh run` naming\n")
	b.WriteString("the key. Flags given to `fleetmesh run` override the file. A gateway's own\n")
	b.WriteString("settings are in `gateway.toml` (spec/gateway.md).\n")
	table := "\x00"
	for _, k := range Keys() {
		if k.Table != table {
			table = k.Table
			if table == "" {
				b.WriteString("\n## Top level\n\n")
			} else {
				fmt.Fprintf(&b, "\n## [%s]\n\n", table)
			}
			b.WriteString("| key | default | what it does |\n|---|---|---|\n")
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", k.Name, strings.ReplaceAll(k.Default, "|", "\\|"), strings.ReplaceAll(k.Comment, "|", "\\|"))
	}
	return b.String()
}
