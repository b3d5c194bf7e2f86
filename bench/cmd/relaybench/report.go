package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// ratios returns candidate/khatru for the headline figures.
func ratios(kh, cand relayResult) map[string]float64 {
	r := map[string]float64{}
	div := func(name string, a, b float64) {
		if b > 0 && a > 0 {
			r[name] = a / b
		}
	}
	div("ingestEventsPerSec", cand.Ingest.EventsPerSec, kh.Ingest.EventsPerSec)
	div("reqP50", cand.Query.All.P50ms, kh.Query.All.P50ms)
	div("reqP99", cand.Query.All.P99ms, kh.Query.All.P99ms)
	div("rssIdleConns", float64(cand.MemIdle.VmRSS), float64(kh.MemIdle.VmRSS))
	div("rssStored", float64(cand.MemStored.VmRSS), float64(kh.MemStored.VmRSS))
	div("rssAnonStored", float64(cand.MemStored.RssAnon), float64(kh.MemStored.RssAnon))
	div("vmHWM", float64(cand.MemEnd.VmHWM), float64(kh.MemEnd.VmHWM))
	div("diskBytes", float64(cand.DiskBytes), float64(kh.DiskBytes))
	return r
}

// mismatches counts, per shape, the measured queries whose number of
// returned events differs between the two relays: a cheap check that both
// answered the same question.
func mismatches(a, b []int, qs []query) map[string]int {
	m := map[string]int{}
	for i := range min(len(a), len(b), len(qs)) {
		if a[i] >= 0 && b[i] >= 0 && a[i] != b[i] {
			m[qs[i].shape]++
		}
	}
	return m
}

func printTable(w io.Writer, rep report) {
	if len(rep.Relays) == 0 {
		return
	}
	kh, cd, sf := relayByRole(rep.Relays, "khatru"), relayByRole(rep.Relays, "candidate"), relayByRole(rep.Relays, "strfry")
	// Ratio columns: the candidate over each reference that ran.
	type ratioCol struct{ num, den *relayResult }
	var cols []ratioCol
	for _, ref := range []*relayResult{kh, sf} {
		if cd != nil && ref != nil {
			cols = append(cols, ratioCol{cd, ref})
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\nrelaybench: %v events, %v publishers x pipeline %v, %v idle conns, %v REQs, %d CPUs (shared, noisy), run order %v\n\n",
		rep.Params["events"], rep.Params["clients"], rep.Params["pipeline"], rep.Params["idle"], rep.Params["queries"], rep.Host.CPUs, rep.Params["order"])
	header := "metric\t"
	for _, r := range rep.Relays {
		header += r.Spec.Name + "\t"
	}
	for _, c := range cols {
		header += "ratio " + c.num.Spec.Name + "/" + c.den.Spec.Name + "\t"
	}
	fmt.Fprintln(tw, header)
	row := func(name string, f func(relayResult) float64, format string) {
		line := name + "\t"
		for _, r := range rep.Relays {
			line += fmt.Sprintf(format, f(r)) + "\t"
		}
		for _, c := range cols {
			if n, d := f(*c.num), f(*c.den); d > 0 {
				line += fmt.Sprintf("%.2f", n/d) + "\t"
			} else {
				line += "-\t"
			}
		}
		fmt.Fprintln(tw, line)
	}
	row("ingest events/s (OK true)", func(r relayResult) float64 { return r.Ingest.EventsPerSec }, "%.0f")
	row("  last-decile events/s", func(r relayResult) float64 {
		if n := len(r.Ingest.DecileRates); n > 0 {
			return r.Ingest.DecileRates[n-1]
		}
		return 0
	}, "%.0f")
	row("  relay CPU µs per event (ingest)", func(r relayResult) float64 { return r.Ingest.CPUMicrosPerEvent }, "%.1f")
	row("  OK true", func(r relayResult) float64 { return float64(r.Ingest.OKTrue) }, "%.0f")
	row("  OK false", func(r relayResult) float64 { return float64(r.Ingest.OKFalse) }, "%.0f")
	row("REQ p50 ms (all shapes)", func(r relayResult) float64 { return r.Query.All.P50ms }, "%.2f")
	row("REQ p99 ms (all shapes)", func(r relayResult) float64 { return r.Query.All.P99ms }, "%.2f")
	row("REQ/s", func(r relayResult) float64 { return r.Query.QPS }, "%.0f")
	row("REQ failures", func(r relayResult) float64 { return float64(r.Query.Failures) }, "%.0f")
	row("REQ not run (phase time limit)", func(r relayResult) float64 { return float64(r.Query.NotRun) }, "%.0f")
	row("REQ timeouts (no EOSE in --eose-wait)", func(r relayResult) float64 { return float64(r.Query.All.Timeouts) }, "%.0f")
	for _, sh := range shapes {
		if _, ok := rep.Relays[0].Query.Shapes[sh]; !ok {
			continue
		}
		row("  "+sh+" p50 ms", func(r relayResult) float64 { return r.Query.Shapes[sh].P50ms }, "%.2f")
		row("  "+sh+" p99 ms", func(r relayResult) float64 { return r.Query.Shapes[sh].P99ms }, "%.2f")
		row("  "+sh+" timeouts", func(r relayResult) float64 { return float64(r.Query.Shapes[sh].Timeouts) }, "%.0f")
		row("  "+sh+" events/REQ", func(r relayResult) float64 { return r.Query.Shapes[sh].EventsPerReq }, "%.1f")
	}
	live := func(f func(*liveResult) float64) func(relayResult) float64 {
		return func(r relayResult) float64 {
			if r.Live == nil {
				return 0
			}
			return f(r.Live)
		}
	}
	if rep.Relays[0].Live != nil {
		row("live: deliveries expected", live(func(l *liveResult) float64 { return float64(l.Expected) }), "%.0f")
		row("live: delivered", live(func(l *liveResult) float64 { return float64(l.Delivered) }), "%.0f")
		row("live: subscriber conns dropped", live(func(l *liveResult) float64 { return float64(l.Dropped) }), "%.0f")
		row("live: OK -> delivery p50 ms", live(func(l *liveResult) float64 { return l.AfterOKP50ms }), "%.2f")
		row("live: OK -> delivery p99 ms", live(func(l *liveResult) float64 { return l.AfterOKP99ms }), "%.2f")
		row("live: send -> delivery p99 ms", live(func(l *liveResult) float64 { return l.AfterSendP99ms }), "%.2f")
		row("live: send -> OK p99 ms", live(func(l *liveResult) float64 { return l.OKP99ms }), "%.2f")
	}
	row("VmRSS MiB at start", func(r relayResult) float64 { return mib(r.MemStart.VmRSS) }, "%.1f")
	row("VmRSS MiB, idle conns open", func(r relayResult) float64 { return mib(r.MemIdle.VmRSS) }, "%.1f")
	row("VmRSS MiB, store filled", func(r relayResult) float64 { return mib(r.MemStored.VmRSS) }, "%.1f")
	row("  RssAnon MiB", func(r relayResult) float64 { return mib(r.MemStored.RssAnon) }, "%.1f")
	row("  RssFile MiB (mapped files)", func(r relayResult) float64 { return mib(r.MemStored.RssFile) }, "%.1f")
	row("VmHWM MiB (peak, whole run)", func(r relayResult) float64 { return mib(r.MemEnd.VmHWM) }, "%.1f")
	row("disk MiB", func(r relayResult) float64 { return float64(r.DiskBytes) / (1 << 20) }, "%.1f")
	tw.Flush()
	for _, r := range rep.Relays {
		fmt.Fprintf(w, "load average (1/5/15 min) for %s: start %s, ingest %s, REQ %s, live %s, end %s\n",
			r.Spec.Name, r.LoadAvg["start"], r.LoadAvg["ingest"], r.LoadAvg["req"], r.LoadAvg["live"], r.LoadAvg["end"])
	}

	for _, r := range rep.Relays {
		var liveErrs []string
		if r.Live != nil {
			liveErrs = r.Live.Errors
		}
		if r.Error != "" || r.Ingest.Error != "" || len(r.Query.Errors) > 0 || len(r.Ingest.FalseReasons) > 0 || len(liveErrs) > 0 {
			fmt.Fprintf(w, "\n%s problems:\n", r.Spec.Name)
			if r.Error != "" {
				fmt.Fprintf(w, "  run: %s\n", r.Error)
			}
			if r.Ingest.Error != "" {
				fmt.Fprintf(w, "  ingest: %s\n", r.Ingest.Error)
			}
			for _, s := range r.Ingest.FalseReasons {
				fmt.Fprintf(w, "  OK false: %s\n", s)
			}
			for _, s := range r.Query.Errors {
				fmt.Fprintf(w, "  REQ: %s\n", s)
			}
			for _, s := range liveErrs {
				fmt.Fprintf(w, "  live: %s\n", s)
			}
		}
		for _, s := range r.ProfileErrors {
			fmt.Fprintf(w, "  %s profile: %s\n", r.Spec.Name, s)
		}
		for _, s := range r.Profiles {
			fmt.Fprintf(w, "  %s profile: %s (go tool pprof -top %s)\n", r.Spec.Name, s, s)
		}
	}
	printCounts := func(ref *relayResult, m map[string]int) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) == 0 {
			fmt.Fprintf(w, "\nresult counts: %s and %s returned the same number of events for every measured REQ\n", cd.Spec.Name, ref.Spec.Name)
			return
		}
		fmt.Fprintf(w, "\nresult counts differ between %s and %s for some REQs:", cd.Spec.Name, ref.Spec.Name)
		for _, k := range keys {
			fmt.Fprintf(w, " %s=%d", k, m[k])
		}
		fmt.Fprintln(w)
	}
	// A reference whose REQ phase did not run is left out of the checks.
	if kh != nil && kh.Query.All.Count == 0 {
		kh = nil
	}
	if sf != nil && sf.Query.All.Count == 0 {
		sf = nil
	}
	if cd != nil && kh != nil {
		printCounts(kh, rep.Mismatches)
	}
	if cd != nil && sf != nil {
		printCounts(sf, rep.MismatchesStrfry)
	}
	if cd != nil && kh != nil {
		ing, p99 := rep.Ratios["ingestEventsPerSec"], rep.Ratios["reqP99"]
		fmt.Fprintf(w, "goal ingest >= 1.5x khatru: ratio %.2f -> %s\n", ing, verdict(ing >= 1.5))
		fmt.Fprintf(w, "REQ p99 vs khatru's:        ratio %.2f\n", p99)
	}
	if cd != nil && sf != nil {
		p99 := rep.RatiosStrfry["reqP99"]
		fmt.Fprintf(w, "goal REQ p99 <= 0.8x strfry's: ratio %.2f -> %s\n", p99, verdict(p99 > 0 && p99 <= 0.8))
		var worse []string
		for _, sh := range shapes {
			a, b := cd.Query.Shapes[sh], sf.Query.Shapes[sh]
			if a.Count > 0 && b.Count > 0 && a.P50ms > b.P50ms {
				worse = append(worse, fmt.Sprintf("%s %.2fx", sh, a.P50ms/b.P50ms))
			}
		}
		fmt.Fprintf(w, "goal every shape's p50 <= strfry's: %s", verdict(len(worse) == 0))
		if len(worse) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(worse, ", "))
		}
		fmt.Fprintln(w)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
