package discoverfeatures

import (
	"encoding/json"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
)

var ours = []Disclosure{
	{FeatureType: FeatureProtocol, ID: "https://didcomm.org/trust-ping/2.0"},
	{FeatureType: FeatureProtocol, ID: "https://didcomm.org/coordinate-mediation/3.0", Roles: []string{"mediator"}},
	{FeatureType: FeatureProtocol, ID: "https://fleetmesh.org/protocols/grant/1.1"},
	{FeatureType: FeatureHeader, ID: "return_route"},
}

func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		queries []Query
		want    []string
	}{
		{"all protocols", []Query{{FeatureProtocol, "*"}}, []string{ours[0].ID, ours[1].ID, ours[2].ID}},
		{"prefix", []Query{{FeatureProtocol, "https://didcomm.org/*"}}, []string{ours[0].ID, ours[1].ID}},
		{"exact", []Query{{FeatureProtocol, "https://didcomm.org/trust-ping/2.0"}}, []string{ours[0].ID}},
		{"header", []Query{{FeatureHeader, "*"}}, []string{"return_route"}},
		{"nothing", []Query{{FeatureProtocol, "https://didcomm.org/tictactoe/*"}}, nil},
		{"overlapping queries disclose once", []Query{{FeatureProtocol, "*"}, {FeatureProtocol, "https://fleetmesh.org/*"}}, []string{ours[0].ID, ours[1].ID, ours[2].ID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := NewQueries("did:key:a", "did:key:b", tc.queries...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Answer(q, "did:key:b", ours)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := Parse(r)
			if err != nil || r.Thid != q.ID {
				t.Fatal(err)
			}
			if len(ds) != len(tc.want) {
				t.Fatalf("disclosed %+v, want %v", ds, tc.want)
			}
			for i := range ds {
				if ds[i].ID != tc.want[i] {
					t.Fatalf("disclosed %+v, want %v", ds, tc.want)
				}
			}
		})
	}
	bad := &didcomm.Message{ID: "1", Type: TypeQueries, Body: json.RawMessage(`{"queries":[]}`)}
	if _, err := Answer(bad, "did:key:b", ours); err == nil {
		t.Fatal("answered a query without queries")
	}
}

func TestNegotiate(t *testing.T) {
	p := func(ids ...string) []Disclosure {
		var out []Disclosure
		for _, id := range ids {
			out = append(out, Disclosure{FeatureType: FeatureProtocol, ID: id})
		}
		return out
	}
	const fam = "https://fleetmesh.org/protocols/grant"
	for _, tc := range []struct {
		name         string
		ours, theirs []Disclosure
		want         string
	}{
		{"same", p(fam + "/1.0"), p(fam + "/1.0"), fam + "/1.0"},
		{"lower minor wins", p(fam + "/1.2"), p(fam + "/1.1"), fam + "/1.1"},
		{"highest shared major", p(fam+"/1.3", fam+"/2.0"), p(fam+"/1.1", fam+"/2.4"), fam + "/2.0"},
		{"no shared major", p(fam + "/1.0"), p(fam + "/2.0"), ""},
		{"other family ignored", p(fam + "/1.0"), p("https://fleetmesh.org/protocols/grants/1.0"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Negotiate(fam, tc.ours, tc.theirs); got != tc.want {
				t.Fatalf("Negotiate = %q, want %q", got, tc.want)
			}
		})
	}
}
