package receipt

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
)

// VerifyChain checks one node's co-signed receipts with no other input:
// every receipt verifies (form, settlement null, both signatures), involves
// did, and within each pair the sequence runs from 1 without a gap or a
// repeat and each Prev is the CID of the receipt before. Disputed receipts
// are checked on their own. It returns the number of co-signed receipts
// checked, and an error saying which receipt failed and why.
func VerifyChain(did string, rs []*Receipt) (int, error) {
	pairs := map[string][]*Receipt{}
	for _, r := range rs {
		if !r.Has(did) {
			return 0, fmt.Errorf("receipt of pair %s does not involve %s", r.PairKey(), did)
		}
		if err := r.Verify(); err != nil {
			return 0, fmt.Errorf("pair %s seq %d window %d: %w", r.PairKey(), r.Seq, r.WindowStart, err)
		}
		if !r.Disputed {
			pairs[r.PairKey()] = append(pairs[r.PairKey()], r)
		}
	}
	n := 0
	keys := make([]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		chain := pairs[k]
		sort.Slice(chain, func(i, j int) bool { return chain[i].Seq < chain[j].Seq })
		var prevWindow int64 = -1
		for i, r := range chain {
			if r.Seq != uint64(i+1) {
				return n, fmt.Errorf("pair %s: seq %d where %d was due (a gap, a repeat, or a chain not starting at 1)", k, r.Seq, i+1)
			}
			if i > 0 {
				want, err := chain[i-1].CID()
				if err != nil {
					return n, err
				}
				got, err := r.PrevCID()
				if err != nil || !got.Equals(want) {
					return n, fmt.Errorf("pair %s seq %d: prev is %s, want %s (the CID of seq %d)", k, r.Seq, got, want, i)
				}
			}
			if r.WindowStart <= prevWindow {
				return n, fmt.Errorf("pair %s seq %d: window %d does not follow window %d", k, r.Seq, r.WindowStart, prevWindow)
			}
			prevWindow = r.WindowStart
			n++
		}
	}
	return n, nil
}

// JSON is a receipt as `fleetmesh receipts --json` prints it: the same
// fields, the CIDs as strings, the signatures base64url, and the
// receipt's canonical bytes (base64url) from which everything else can be
// checked.
type JSON struct {
	CID         string          `json:"cid"`
	V           int             `json:"v"`
	A           string          `json:"a"`
	B           string          `json:"b"`
	WindowStart int64           `json:"window_start"`
	WindowSecs  int64           `json:"window_secs"`
	Seq         uint64          `json:"seq"`
	Prev        *string         `json:"prev"`
	CountsA     Side            `json:"counts_a"`
	CountsB     Side            `json:"counts_b"`
	Disputed    bool            `json:"disputed"`
	Settlement  json.RawMessage `json:"settlement"`
	SigA        string          `json:"sig_a"`
	SigB        string          `json:"sig_b"`
	Raw         string          `json:"raw"`
}

// ToJSON returns the receipt's JSON view.
func (r *Receipt) ToJSON() (JSON, error) {
	c, err := r.CID()
	if err != nil {
		return JSON{}, err
	}
	raw, err := r.Encode()
	if err != nil {
		return JSON{}, err
	}
	j := JSON{CID: c.String(), V: r.V, A: r.A, B: r.B, WindowStart: r.WindowStart, WindowSecs: r.WindowSecs,
		Seq: r.Seq, CountsA: r.CountsA, CountsB: r.CountsB, Disputed: r.Disputed, Settlement: json.RawMessage("null"),
		SigA: base64.RawURLEncoding.EncodeToString(r.SigA), SigB: base64.RawURLEncoding.EncodeToString(r.SigB),
		Raw: base64.RawURLEncoding.EncodeToString(raw)}
	if p, err := r.PrevCID(); err == nil && p.Defined() {
		s := p.String()
		j.Prev = &s
	}
	return j, nil
}
