// Package discoverfeatures implements Discover Features 2.0
// (https://didcomm.org/discover-features/2.0/, DIDComm Messaging v2 spec §
// "Discover Features Protocol 2.0"): a node asks which protocols (or
// headers, or goal codes) a peer supports and the peer discloses them.
// fleetmesh negotiates protocol versions with it: each side discloses every
// PIURI it speaks and both use the highest minor version they share.
//
// It builds queries and answers them from a feature list; it does not send.
package discoverfeatures

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"fleetmesh.org/fleetmesh/didcomm"
)

// PIURI and message types.
const (
	PIURI        = "https://didcomm.org/discover-features/2.0"
	TypeQueries  = PIURI + "/queries"
	TypeDisclose = PIURI + "/disclose"
)

// Feature types.
const (
	FeatureProtocol = "protocol"
	FeatureGoalCode = "goal-code"
	FeatureHeader   = "header"
)

// MaxQueries bounds the queries answered from one message.
const MaxQueries = 32

// Query asks for features of a type whose id matches Match, where a
// trailing "*" matches any suffix.
type Query struct {
	FeatureType string `json:"feature-type"`
	Match       string `json:"match"`
}

// Disclosure is one supported feature.
type Disclosure struct {
	FeatureType string   `json:"feature-type"`
	ID          string   `json:"id"`
	Roles       []string `json:"roles,omitempty"`
}

// QueriesBody is the body of a queries message.
type QueriesBody struct {
	Queries []Query `json:"queries"`
}

// DiscloseBody is the body of a disclose message.
type DiscloseBody struct {
	Disclosures []Disclosure `json:"disclosures"`
}

// NewQueries returns a queries message.
func NewQueries(from, to string, qs ...Query) (*didcomm.Message, error) {
	m, err := didcomm.NewMessage(TypeQueries, QueriesBody{Queries: qs})
	if err != nil {
		return nil, err
	}
	m.From, m.To = from, []string{to}
	return m, nil
}

// Answer returns the disclose message for a queries message, listing the
// features of ours that match.
func Answer(q *didcomm.Message, self string, ours []Disclosure) (*didcomm.Message, error) {
	var b QueriesBody
	if err := json.Unmarshal(q.Body, &b); err != nil || len(b.Queries) == 0 {
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("discover-features queries without queries")}
	}
	if len(b.Queries) > MaxQueries {
		return nil, &didcomm.Problem{Code: didcomm.CodeTooBig, Err: fmt.Errorf("%d queries (at most %d)", len(b.Queries), MaxQueries)}
	}
	out := DiscloseBody{Disclosures: []Disclosure{}}
	seen := map[string]bool{}
	for _, qu := range b.Queries {
		for _, d := range ours {
			if d.FeatureType == qu.FeatureType && matches(qu.Match, d.ID) && !seen[d.FeatureType+" "+d.ID] {
				seen[d.FeatureType+" "+d.ID] = true
				out.Disclosures = append(out.Disclosures, d)
			}
		}
	}
	r, err := didcomm.NewMessage(TypeDisclose, out)
	if err != nil {
		return nil, err
	}
	r.From, r.Thid = self, q.ID
	if q.From != "" {
		r.To = []string{q.From}
	}
	return r, nil
}

func matches(pattern, id string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(id, prefix)
	}
	return pattern == id
}

// Parse reads a disclose message.
func Parse(m *didcomm.Message) ([]Disclosure, error) {
	if m.Type != TypeDisclose {
		return nil, &didcomm.Problem{Code: didcomm.CodeUnsupportedType, Err: fmt.Errorf("%s is not a disclose", m.Type)}
	}
	var b DiscloseBody
	if err := json.Unmarshal(m.Body, &b); err != nil {
		return nil, &didcomm.Problem{Code: didcomm.CodeMalformed, Err: err}
	}
	return b.Disclosures, nil
}

// Negotiate returns the PIURI of the highest version of the protocol family
// (a PIURI without its version, e.g. "https://didcomm.org/trust-ping") that
// both sides speak with the same major version, or "" when they share
// none. Minor versions are compatible within a major version, so the
// result is the lower of the two sides' highest minor in the highest
// shared major.
func Negotiate(family string, ours, theirs []Disclosure) string {
	best := map[int]int{} // major → their highest minor
	for _, d := range theirs {
		if maj, min, ok := version(family, d); ok && (min > best[maj] || !hasKey(best, maj)) {
			best[maj] = min
		}
	}
	type cand struct{ maj, min int }
	var cands []cand
	for _, d := range ours {
		maj, min, ok := version(family, d)
		if !ok || !hasKey(best, maj) {
			continue
		}
		if best[maj] < min {
			min = best[maj]
		}
		cands = append(cands, cand{maj, min})
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].maj != cands[j].maj {
			return cands[i].maj > cands[j].maj
		}
		return cands[i].min > cands[j].min
	})
	return fmt.Sprintf("%s/%d.%d", family, cands[0].maj, cands[0].min)
}

func hasKey(m map[int]int, k int) bool { _, ok := m[k]; return ok }

func version(family string, d Disclosure) (maj, min int, ok bool) {
	if d.FeatureType != FeatureProtocol {
		return 0, 0, false
	}
	v, found := strings.CutPrefix(d.ID, family+"/")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(v, ".")
	if !found {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(a)
	min, err2 := strconv.Atoi(b)
	return maj, min, err1 == nil && err2 == nil
}
