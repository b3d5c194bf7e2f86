package label

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/standing"
)

var fullSim = flag.Bool("label.full", false, "Sybil labeller simulation from 200 honest observers (default: 3)")

// swapReader is a standing.Reader whose scores the simulation swaps from
// one observer to the next.
type swapReader struct{ s []float64 }

func (r *swapReader) Of(did string) float64 {
	var i int
	if _, err := fmt.Sscanf(did, "did:sim:%d", &i); err != nil || i >= len(r.s) {
		return 0
	}
	return r.s[i]
}

func simDID(i int32) string { return fmt.Sprintf("did:sim:%d", i) }

// simAuthor is the Nostr pubkey of simulated author i.
func simAuthor(i int) (pk [32]byte) {
	binary.BigEndian.PutUint64(pk[:], uint64(i)+1)
	pk[31] = 0xa
	return pk
}

// TestSybilLabellers runs the labels' policy on the standing issue's
// graph (standing.PowerLawSimulation(10,000, 21, 42), the graph of
// standing's TestSybilSimulation): an attacker with one real honest
// counterparty adds 1,000 Sybils (MeritRank's parallel shape, co-signing
// a thousand times honest service), and all 1,000 label the same 100
// honest authors spam. Seen from honest observers (the attacker's
// counterparty, and honest nodes picked at random), with the default
// [labels] and [standing] settings and 10,000 walks as a node draws:
//   - the Sybils push 0% of the honest authors past the default
//     threshold, while the plain count rule "3 or more reports", in the
//     same run, refuses 100% of them;
//   - a real campaign is caught: for each observer, the three honest
//     labellers with the least standing in the top quarter of its view
//     (the weakest three that qualify) label an author, and the
//     observer's policy refuses that author.
//
// -label.full runs 200 observers instead of 3.
func TestSybilLabellers(t *testing.T) {
	const n, sybils, authors = 10_000, 1_000, 100
	observers := 3
	if *fullSim {
		observers = 200
	}
	sim := standing.PowerLawSimulation(n, 21, 42)
	r := rand.New(rand.NewPCG(42, 3))
	h := int32(n/2 + r.IntN(n/4))
	a := sim.Attach(h)
	syb, err := sim.AddSybils(a, "parallel", sybils)
	if err != nil {
		t.Fatal(err)
	}
	obs := []int32{h}
	for len(obs) < observers {
		if o := r.Int32N(n); o != h {
			obs = append(obs, o)
		}
	}
	rd := &swapReader{}
	scfg := standing.DefaultConfig()
	p, err := NewPolicy(DefaultConfig(), Options{Standing: rd, Now: func() time.Time { return time.Unix(t0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	id := 0
	add := func(labeller int32, author [32]byte) {
		id++
		var lid [32]byte
		binary.BigEndian.PutUint64(lid[:], uint64(id))
		l := &Label{ID: lid, Labeller: simDID(labeller), Reason: Spam, Target: Target{Author, hexOf(author)}, Created: t0}
		if _, _, err := p.set.Add(l, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range syb {
		for i := range authors {
			add(s, simAuthor(i))
		}
	}
	refused := func(author [32]byte) *Verdict {
		return p.Verdict(&nostr.Event{PubKey: author, Kind: 1, CreatedAt: t0})
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| observer | Sybils' sum | without min_standing | honest authors refused: ours | count rule (≥3) | top quarter from | campaign (3 weakest of it): sum | refused |\n|---|---|---|---|---|---|---|---|\n")
	for k, o := range obs {
		rd.s = sim.Standing(o, scfg, 1000+uint64(o))
		// The count rule: every honest author has 1,000 reports.
		countRefused := 0
		ourRefused := 0
		for i := range authors {
			if len(p.set.On("p:"+hexOf(simAuthor(i)), t0)) >= 3 {
				countRefused++
			}
			if refused(simAuthor(i)) != nil {
				ourRefused++
			}
		}
		sybSum := p.sum([]byte("p:"+hexOf(simAuthor(0))), t0)
		raw := 0.0 // what they would weigh with no min_standing
		for _, s := range syb {
			raw += rd.s[s]
		}
		// The campaign: the weakest three of the observer's top quarter
		// of honest nodes.
		var honest []int32
		for v := range int32(n) {
			if v != o {
				honest = append(honest, v)
			}
		}
		sort.SliceStable(honest, func(i, j int) bool { return rd.s[honest[i]] > rd.s[honest[j]] })
		q := honest[:len(honest)/4]
		three := q[len(q)-3:]
		campaign := simAuthor(authors + k)
		for _, v := range three {
			add(v, campaign)
		}
		v := refused(campaign)
		sum := p.sum([]byte("p:"+hexOf(campaign)), t0)
		fmt.Fprintf(&table, "| %d | %.6f | %.6f | %d%% | %d%% | %.6f | %.6f | %v |\n", o, sybSum, raw, ourRefused*100/authors,
			countRefused*100/authors, rd.s[q[len(q)-1]], sum, v != nil)
		if ourRefused != 0 {
			t.Errorf("observer %d: the Sybils push %d%% of honest authors past the threshold (sum %.6f)", o, ourRefused*100/authors, sybSum)
		}
		if countRefused != authors {
			t.Errorf("observer %d: the count rule refuses only %d%%: the attack is not real", o, countRefused*100/authors)
		}
		if v == nil {
			t.Errorf("observer %d: three honest labellers of its top quarter (sum %.6f) do not pass the threshold %v", o, sum, p.cfg.Threshold)
		}
	}
	t.Logf("%d nodes, %d Sybil labellers behind one attacker, %d honest authors, %d observers, threshold %v, min_standing %v\n%s",
		n, sybils, authors, len(obs), p.cfg.Threshold, p.cfg.MinStanding, table.String())
}
