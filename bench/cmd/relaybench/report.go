package main

import (
	"fmt"
	"io"
	"sort"
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\nrelaybench: %v events, %v publishers x pipeline %v, %v idle conns, %v REQs, %d CPUs (shared, noisy)\n\n",
		rep.Params["events"], rep.Params["clients"], rep.Params["pipeline"], rep.Params["idle"], rep.Params["queries"], rep.Host.CPUs)
	header := "metric\t"
	for _, r := range rep.Relays {
		header += r.Spec.Name + "\t"
	}
	if len(rep.Relays) == 2 {
		header += "ratio " + rep.Relays[1].Spec.Name + "/" + rep.Relays[0].Spec.Name + "\t"
	}
	fmt.Fprintln(tw, header)
	row := func(name string, f func(relayResult) float64, format string) {
		line := name + "\t"
		vals := []float64{}
		for _, r := range rep.Relays {
			v := f(r)
			vals = append(vals, v)
			line += fmt.Sprintf(format, v) + "\t"
		}
		if len(vals) == 2 && vals[0] > 0 {
			line += fmt.Sprintf("%.2f", vals[1]/vals[0]) + "\t"
		} else if len(vals) == 2 {
			line += "-\t"
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
		sh := sh
		row("  "+sh+" p50 ms", func(r relayResult) float64 { return r.Query.Shapes[sh].P50ms }, "%.2f")
		row("  "+sh+" p99 ms", func(r relayResult) float64 { return r.Query.Shapes[sh].P99ms }, "%.2f")
		row("  "+sh+" timeouts", func(r relayResult) float64 { return float64(r.Query.Shapes[sh].Timeouts) }, "%.0f")
		row("  "+sh+" events/REQ", func(r relayResult) float64 { return r.Query.Shapes[sh].EventsPerReq }, "%.1f")
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
		fmt.Fprintf(w, "load average (1/5/15 min) for %s: start %s, ingest %s, REQ %s, end %s\n",
			r.Spec.Name, r.LoadAvg["start"], r.LoadAvg["ingest"], r.LoadAvg["req"], r.LoadAvg["end"])
	}

	for _, r := range rep.Relays {
		if r.Error != "" || r.Ingest.Error != "" || len(r.Query.Errors) > 0 || len(r.Ingest.FalseReasons) > 0 {
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
		}
		for _, s := range r.ProfileErrors {
			fmt.Fprintf(w, "  %s profile: %s\n", r.Spec.Name, s)
		}
		for _, s := range r.Profiles {
			fmt.Fprintf(w, "  %s profile: %s (go tool pprof -top %s)\n", r.Spec.Name, s, s)
		}
	}
	if len(rep.Relays) == 2 {
		keys := make([]string, 0, len(rep.Mismatches))
		for k := range rep.Mismatches {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) == 0 {
			fmt.Fprintf(w, "\nresult counts: both relays returned the same number of events for every measured REQ\n")
		} else {
			fmt.Fprintf(w, "\nresult counts differ between the relays for some REQs:")
			for _, k := range keys {
				fmt.Fprintf(w, " %s=%d", k, rep.Mismatches[k])
			}
			fmt.Fprintln(w)
		}
		ing, p99 := rep.Ratios["ingestEventsPerSec"], rep.Ratios["reqP99"]
		fmt.Fprintf(w, "goal ingest >= 1.5x khatru: ratio %.2f -> %s\n", ing, verdict(ing >= 1.5))
		fmt.Fprintf(w, "goal REQ p99 <= khatru's:   ratio %.2f -> %s\n", p99, verdict(p99 > 0 && p99 <= 1.0))
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
