package exchange

import (
	"fmt"
	"math"
	"testing"

	"fleetmesh.org/fleetmesh/receipt"
)

// oldAgree is the rule before issue 24, kept only as the benchmark's
// reference: the responder compared one way, with the tolerance a
// fraction of the larger figure and bytes' slack at the larger side's
// mean event size, and the proposer did not compare at all.
func oldAgree(a, b receipt.Side, tol float64, slack uint64) string {
	cmp := func(what string, x, y receipt.Counts) string {
		fx, fy := x.Fields(), y.Fields()
		events := max(x.Events, y.Events)
		for i := range fx {
			hi := max(fx[i].Value, fy[i].Value)
			diff := hi - min(fx[i].Value, fy[i].Value)
			allowed := slack
			switch {
			case fx[i].Name == "bytes" && events > 0:
				allowed = slack * ((hi + events - 1) / events)
			case fx[i].Name == "circuit_bytes":
				allowed = slack * CircuitSlackBytes
			}
			if float64(diff) > max(math.Floor(tol*float64(hi)), float64(allowed)) {
				return fmt.Sprintf("%s %s: %d against %d", what, fx[i].Name, fx[i].Value, fy[i].Value)
			}
		}
		return ""
	}
	if d := cmp("a gave / b received", a.Gave, b.Received); d != "" {
		return d
	}
	return cmp("b gave / a received", b.Gave, a.Received)
}

// BenchmarkChecks is the cost of the figure checks each end makes before
// it signs, old rule against new in the same run. The responder's:
// oldAgree one way, against CheckProposal both ways within the stricter
// bounds. The proposer's new part is one Agree inside CheckSigned:
// proposer/agree measures it alone and proposer/CheckSigned the whole
// check, so the old proposer's check is their difference.
func BenchmarkChecks(b *testing.B) {
	mine := receipt.Side{Gave: receipt.Counts{Events: 1000, Bytes: 300_000}, Received: receipt.Counts{Events: 100, Bytes: 30_000, MediationMessages: 40}}
	theirs := receipt.Side{Gave: mine.Received, Received: mine.Gave}
	body := ProposeBody{WindowStart: 3600, WindowSecs: 3600, Seq: 1, Counts: theirs, Bounds: &DefaultBounds}
	b.Run("responder/old", func(b *testing.B) {
		for b.Loop() {
			if oldAgree(body.Counts, mine, DefaultBounds.Tolerance, DefaultBounds.Slack) != "" {
				b.Fatal("disagree")
			}
		}
	})
	b.Run("responder/new", func(b *testing.B) {
		for b.Loop() {
			if CheckProposal(body, mine, DefaultBounds) != "" {
				b.Fatal("disagree")
			}
		}
	})
	b.Run("proposer/agree", func(b *testing.B) {
		for b.Loop() {
			if Agree(mine, theirs, DefaultBounds) != "" {
				b.Fatal("disagree")
			}
		}
	})
	p, r := keys(b)
	raw := signed(b, p, r, mine, theirs)
	holds := func(int64) (receipt.Side, bool) { return mine, true }
	b.Run("proposer/CheckSigned", func(b *testing.B) {
		for b.Loop() {
			if _, err := CheckSigned(raw, p.DID(), r.DID(), nil, 3600, DefaultBounds, holds); err != nil {
				b.Fatal(err)
			}
		}
	})
}
