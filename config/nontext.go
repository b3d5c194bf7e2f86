package config

import (
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"fleetmesh.org/fleetmesh/config/setting"
)

var durationType = reflect.TypeFor[setting.Duration]()

// nonTextKey finds the first key of the file that gives a duration a value
// that is not a string (sync_interval = 60). go-toml hands such a value to
// the duration's parser as text but reports the parser's error without the
// key, so Load looks for it in the file's plain tables.
func nonTextKey(data []byte) string {
	var doc map[string]any
	if toml.Unmarshal(data, &doc) != nil {
		return ""
	}
	return nonTextKeyIn(reflect.TypeFor[Config](), doc, "")
}

func nonTextKeyIn(t reflect.Type, table map[string]any, prefix string) string {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		switch {
		case !f.IsExported() || name == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			if k := nonTextKeyIn(f.Type, table, prefix); k != "" {
				return k
			}
			continue
		case name == "":
			name = f.Name
		}
		v, ok := table[name]
		if !ok {
			continue
		}
		if f.Type == durationType {
			if _, isText := v.(string); !isText {
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
