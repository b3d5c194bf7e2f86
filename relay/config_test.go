package relay

import (
	"reflect"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"fleetmesh.org/fleetmesh/clientaddr"
)

// TestConfigIsAFileSection checks that Config, as config.toml's [relay]
// section, writes every tagged setting and reads it back unchanged, and
// that the fields tagged "-" stay out of the file.
func TestConfigIsAFileSection(t *testing.T) {
	def := DefaultConfig()
	def.AuthRequiredKinds = []int{4}
	proxies, err := clientaddr.ParseProxies([]string{"10.0.0.0/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	def.TrustedProxies = proxies
	data, err := toml.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	var got Config
	if err := toml.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	ct := reflect.TypeFor[Config]()
	want, gotV := reflect.ValueOf(def), reflect.ValueOf(got)
	for i := range ct.NumField() {
		f := ct.Field(i)
		tag := f.Tag.Get("toml")
		switch {
		case !f.IsExported():
		case tag == "":
			t.Errorf("field %s has no toml tag: name its key, or tag it \"-\" if it is not a setting", f.Name)
		case tag == "-":
			if !gotV.Field(i).IsZero() {
				t.Errorf("field %s is not a setting but was read from the file", f.Name)
			}
		default:
			if _, ok := doc[tag]; !ok {
				t.Errorf("key %s (%s) was not written", tag, f.Name)
			}
			if !reflect.DeepEqual(gotV.Field(i).Interface(), want.Field(i).Interface()) {
				t.Errorf("key %s: read back %v, wrote %v", tag, gotV.Field(i), want.Field(i))
			}
		}
	}
}
