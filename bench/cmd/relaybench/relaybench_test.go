package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func TestFrameHead(t *testing.T) {
	tests := []struct {
		in            string
		label, second string
		ok            bool
	}{
		{`["OK","abc",true,""]`, "OK", "abc", true},
		{` [ "EOSE" , "sub1" ]`, "EOSE", "sub1", true},
		{`["NOTICE"]`, "NOTICE", "", true},
		{`["EVENT","s",{"id":"x"}]`, "EVENT", "s", true},
		{`["CLOSED","s","error: \"x\""]`, "CLOSED", "s", true},
		{`{"a":1}`, "", "", false},
		{`[1,2]`, "", "", false},
		{`["unterminated`, "", "", false},
		{`["esc\"aped"]`, "", "", false},
		{``, "", "", false},
	}
	for _, tt := range tests {
		label, second, ok := frameHead([]byte(tt.in))
		if label != tt.label || second != tt.second || ok != tt.ok {
			t.Errorf("frameHead(%q) = %q, %q, %v; want %q, %q, %v", tt.in, label, second, ok, tt.label, tt.second, tt.ok)
		}
	}
}

// FuzzFrameHead checks that whenever frameHead accepts a message that is
// valid JSON, it agrees with encoding/json about the first two strings.
func FuzzFrameHead(f *testing.F) {
	for _, s := range []string{`["OK","abc",true,""]`, `["EOSE","x"]`, `["EVENT","s",{"id":"x"}]`, `["NOTICE","hi"]`, `[`, `["a",1]`, `[ "b" , "c" ]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		label, second, ok := frameHead(msg)
		if !ok {
			return
		}
		var arr []json.RawMessage
		if json.Unmarshal(msg, &arr) != nil {
			return // frameHead only looks at the head; the rest may be anything
		}
		var l string
		if len(arr) == 0 || json.Unmarshal(arr[0], &l) != nil || l != label {
			t.Fatalf("label %q, encoding/json says %s", label, arr)
		}
		var s string
		if second != "" && (len(arr) < 2 || json.Unmarshal(arr[1], &s) != nil || s != second) {
			t.Fatalf("second %q, encoding/json says %q", second, s)
		}
	})
}

func TestWithBenchLimits(t *testing.T) {
	var limits strings.Builder
	for _, kv := range benchLimits {
		limits.WriteString(kv.key + " = " + kv.value + "\n")
	}
	l := limits.String()
	tests := []struct{ name, in, want string }{
		{"empty", "", "[relay]\n" + l},
		{"replaces existing", "[node]\nclass = \"home\"\n\n[relay]\nevents_per_second = 50\nmax_subs = 20\nip_req_ms_per_second = 200\n",
			"[node]\nclass = \"home\"\n\n[relay]\n" + l + "max_subs = 20\n"},
		{"other tables only", "[store]\npath = \"x\"\n", "[store]\npath = \"x\"\n\n[relay]\n" + l},
		{"keys of other tables kept", "[a]\nevents_per_second = 5\n[relay]\n", "[a]\nevents_per_second = 5\n[relay]\n" + l},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := withBenchLimits(tt.in); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, u := range []string{"ws://127.0.0.1:1234", "ws://[::1]:80", "ws://127.9.9.9:1"} {
		if err := checkLoopback(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"ws://10.0.0.1:1", "ws://example.com:80", "ws://0.0.0.0:1", "::"} {
		if err := checkLoopback(u); err == nil {
			t.Errorf("%s accepted", u)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(d, 0.5); got != 50*time.Millisecond {
		t.Errorf("p50 = %v", got)
	}
	if got := percentile(d, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v", got)
	}
	if got := percentile(d[:1], 0.99); got != time.Millisecond {
		t.Errorf("p99 of one = %v", got)
	}
}

// TestCorpus checks that the generated corpus is deterministic, that every
// event's id and signature verify, that the kind mix is there, and that the
// cache round-trips.
func TestCorpus(t *testing.T) {
	p := corpusParams{events: 600, seed: 7}
	dir := t.TempDir()
	c, err := loadOrBuildCorpus(p, dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	again, err := generateEvents(p)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[int]int{}
	for i, ev := range again {
		if ev.ID != c.meta[i].id {
			t.Fatalf("event %d: not deterministic", i)
		}
		if !ev.CheckID() {
			t.Fatalf("event %d: bad id", i)
		}
		if ok, err := ev.CheckSignature(); !ok || err != nil {
			t.Fatalf("event %d: bad signature: %v", i, err)
		}
		kinds[ev.Kind]++
		var parsed nostr.Event
		if err := parsed.UnmarshalJSON(c.frames[i][len(`["EVENT",`) : len(c.frames[i])-1]); err != nil || parsed.ID != ev.ID {
			t.Fatalf("event %d: frame does not hold the event: %v", i, err)
		}
	}
	for _, k := range []int{0, 1, 3, 7, 30023} {
		if kinds[k] == 0 {
			t.Errorf("no kind %d in %v", k, kinds)
		}
	}
	if len(c.authors) != p.authorCount() {
		t.Errorf("%d authors, want %d", len(c.authors), p.authorCount())
	}
	// Second load comes from the cache.
	c2, err := loadOrBuildCorpus(p, dir, t.Logf)
	if err != nil || !slices.EqualFunc(c.frames, c2.frames, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("cache round trip differs: %v", err)
	}

	qs := buildQueries(c, 3*len(shapes), 1)
	seen := map[string]bool{}
	for _, q := range qs {
		seen[q.shape] = true
		b, _ := json.Marshal(q.filter)
		if q.shape != "ids" && !strings.Contains(string(b), `"limit"`) {
			t.Errorf("%s filter without limit: %s", q.shape, b)
		}
	}
	if len(seen) != len(shapes) {
		t.Errorf("shapes covered: %v", seen)
	}
}

func TestStrfryConf(t *testing.T) {
	tmpl := "db = \"./strfry-db/\"\nrelay {\n    bind = \"0.0.0.0\"\n    port = 7777\n    info {\n        name = \"x\"\n    }\n}\n"
	got, err := strfryConf(tmpl, "/tmp/rb/strfry-data", 41234)
	if err != nil {
		t.Fatal(err)
	}
	want := "db = \"/tmp/rb/strfry-data/\"\nrelay {\n    bind = \"127.0.0.1\"\n    port = 41234\n    info {\n        name = \"x\"\n    }\n}\n"
	if got != want {
		t.Errorf("strfryConf:\n%s\nwant\n%s", got, want)
	}
	if _, err := strfryConf("relay {\n    port = 1\n}\n", "/tmp/x", 2); err == nil {
		t.Error("a template without a db line was accepted")
	}
}

func TestRunOrder(t *testing.T) {
	specs := []relaySpec{{Name: "khatru", Role: "khatru"}, {Name: "fleetmesh", Role: "candidate"}, {Name: "strfry", Role: "strfry"}}
	for _, tt := range []struct {
		list      string
		candFirst bool
		want      []int
		ok        bool
	}{
		{"", false, []int{0, 1, 2}, true},
		{"", true, []int{1, 0, 2}, true},
		{"strfry,fleetmesh,khatru", false, []int{2, 1, 0}, true},
		{"strfry,khatru", false, nil, false},
		{"strfry,strfry,khatru", false, nil, false},
		{"nostr-rs,khatru,fleetmesh", false, nil, false},
	} {
		got, err := runOrder(specs, tt.list, tt.candFirst)
		if (err == nil) != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("runOrder(%q, %v) = %v, %v; want %v, ok %v", tt.list, tt.candFirst, got, err, tt.want, tt.ok)
		}
	}
}

func TestEventID(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, msg := range []string{
		`["EVENT","s",{"id":"` + id + `","pubkey":"x"}]`,
		`["EVENT","s",{"content":"say \"id\":\"no\"","created_at":1,"id":"` + id + `"}]`,
	} {
		if got := eventID([]byte(msg)); got != id {
			t.Errorf("eventID(%s) = %q", msg, got)
		}
	}
	if got := eventID([]byte(`["EVENT","s",{"id":"short"}]`)); got != "" {
		t.Errorf("eventID of a short id = %q", got)
	}
}
