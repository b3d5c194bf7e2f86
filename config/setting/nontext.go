package setting

import (
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

var (
	durationType = reflect.TypeFor[Duration]()
	switchType   = reflect.TypeFor[Switch]()
)

// NonTextKey finds the first key of a TOML file that gives a Duration of
// schema (a struct type, as the file decodes into) a value that is not a
// string, such as sync_interval = 60, or a Switch one that is neither a
// string nor a boolean, and returns it in full ("mesh.sync_interval"), or
// "" if there is none. go-toml hands such a value to UnmarshalText as text
// but returns the error without its key, so a loader that gets a
// DurationError or SwitchError outside a toml.DecodeError calls this to
// name the key.
func NonTextKey(data []byte, schema reflect.Type) string {
	var doc map[string]any
	if toml.Unmarshal(data, &doc) != nil {
		return ""
	}
	return nonTextKeyIn(schema, doc, "")
}

func nonTextKeyIn(t reflect.Type, table map[string]any, prefix string) string {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			// An embedded struct's fields are keys of this table.
			if k := nonTextKeyIn(f.Type, table, prefix); k != "" {
				return k
			}
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		v, ok := table[name]
		if !ok {
			continue
		}
		if f.Type == durationType || f.Type == switchType {
			_, isText := v.(string)
			_, isBool := v.(bool)
			if !isText && !(isBool && f.Type == switchType) {
				return prefix + name
			}
			continue
		}
		if sub, ok := v.(map[string]any); ok && f.Type.Kind() == reflect.Struct {
			if k := nonTextKeyIn(f.Type, sub, prefix+name+"."); k != "" {
				return k
			}
		}
	}
	return ""
}
