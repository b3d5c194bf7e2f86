package dashboard

import (
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Series is one line of a panel: a metric family, read as it is (a gauge)
// or as its rate per second (a counter), optionally split by one label.
type Series struct {
	// Metric is the Prometheus family name.
	Metric string
	// Rate plots the counter's increase per second instead of its value.
	Rate bool
	// By splits the series by this label's values (at most MaxSplits of
	// them; the rest are summed as "other"), or by several labels' values
	// together, comma-separated ("class,transport": a line per pair, named
	// "home/quic"). Empty: the family's sum. A split line that is 0 at
	// every point of the window is not drawn; the legend says some were
	// left out.
	By string
	// Name labels the line; by default the metric name (or the label
	// value, when split).
	Name string
	// Bound marks a limit the other lines are measured against (storage
	// used against storage_max_bytes). It does not set the plot's scale:
	// far above the other lines it is not drawn, and the legend gives its
	// value and how much of it the other lines use, so that a small use
	// stays readable instead of flattened against the limit.
	Bound bool
}

// Panel is one plot.
type Panel struct {
	Title  string
	Unit   string
	Series []Series
	// Empty says, in an operator's words, what the panel will show and
	// when, while the node has exported none of its metrics.
	Empty string
}

// MaxSplits bounds the lines one split series draws, so that a label with
// many values cannot make a page of thousands of lines.
const MaxSplits = 8

// point is one sample: the raw value of every line at a moment.
type point struct {
	at time.Time
	// values holds a gauge value or counter total for each line key,
	// sorted by key. A slice, not a map, and keys shared with the sample
	// before: the hour and day windows keep 648 samples of some tens of
	// lines each, and a map and a fresh key per line per sample cost
	// several times the values themselves.
	values []lineValue
}

// lineValue is one line's value in a sample.
type lineValue struct {
	key string
	v   float64
}

// find returns the index of key in p's sorted values, and whether p has
// it.
func (p *point) find(key string) (int, bool) {
	return slices.BinarySearchFunc(p.values, key, func(lv lineValue, k string) int { return strings.Compare(lv.key, k) })
}

// get returns key's value in p, and whether p has one.
func (p *point) get(key string) (float64, bool) {
	i, ok := p.find(key)
	if !ok {
		return 0, false
	}
	return p.values[i].v, true
}

// set adds key's value to p, which is sorted (finish) once every line is
// in. A key the sample before also had takes that sample's string, so
// that the windows keep one copy of each key, not one per sample.
func (p *point) set(prev *point, key string, v float64) {
	if prev != nil {
		if i, ok := prev.find(key); ok {
			key = prev.values[i].key
		}
	}
	p.values = append(p.values, lineValue{key, v})
}

// finish sorts p's lines by key and drops the spare capacity.
func (p *point) finish() {
	slices.SortFunc(p.values, func(a, b lineValue) int { return strings.Compare(a.key, b.key) })
	p.values = slices.Clip(p.values)
}

// ring is a bounded window of samples, oldest first.
type ring struct {
	points []point
	max    int
}

func (r *ring) push(p point) {
	if len(r.points) == r.max {
		copy(r.points, r.points[1:])
		r.points = r.points[:r.max-1]
	}
	r.points = append(r.points, p)
}

// lineKey names one line of a series: the series' index in its panel and
// the label value it is split by.
func lineKey(panel, series int, label string) string {
	return string(rune('A'+panel)) + string(rune('a'+series)) + "/" + label
}

// sample reads every panel's series from the gathered families; prev,
// the sample before it or nil, lends it its line keys.
func sample(panels []Panel, fams map[string]*dto.MetricFamily, at time.Time, prev *point) point {
	p := point{at: at}
	if prev != nil {
		p.values = make([]lineValue, 0, len(prev.values))
	}
	for pi, pn := range panels {
		for si, s := range pn.Series {
			fam, ok := fams[s.Metric]
			if !ok {
				continue
			}
			sums := map[string]float64{}
			by := s.by()
			for _, m := range fam.GetMetric() {
				sums[splitLabel(m, by)] += value(m)
			}
			if len(sums) > MaxSplits {
				labels := make([]string, 0, len(sums))
				for l := range sums {
					labels = append(labels, l)
				}
				// Keep the largest; fold the rest into "other".
				// Ties by label, so that lines at the same value (at 0,
				// say) keep their places from one sample to the next.
				sort.Slice(labels, func(i, j int) bool {
					if sums[labels[i]] != sums[labels[j]] {
						return sums[labels[i]] > sums[labels[j]]
					}
					return labels[i] < labels[j]
				})
				other := 0.0
				for _, l := range labels[MaxSplits-1:] {
					other += sums[l]
					delete(sums, l)
				}
				sums["other"] = other
			}
			for l, v := range sums {
				p.set(prev, lineKey(pi, si, l), v)
			}
		}
	}
	p.finish()
	return p
}

// by is the labels a series is split by, in order.
func (s Series) by() []string {
	if s.By == "" {
		return nil
	}
	return strings.Split(s.By, ",")
}

// splitLabel names the line a metric belongs to: its values of the labels
// by, joined with "/" ("" for a series that is not split).
func splitLabel(m *dto.Metric, by []string) string {
	vals := make([]string, len(by))
	for i, name := range by {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == name {
				vals[i] = lp.GetValue()
			}
		}
	}
	return strings.Join(vals, "/")
}

// value is a metric's number whatever its type: a histogram or summary
// counts its observations.
func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount())
	}
	return 0
}

// line is one drawn line: its label and its (time, value) points, rates
// already taken.
type line struct {
	Name   string
	Bound  bool         // from a Bound series
	Points [][2]float64 // unix seconds, value
	Last   float64
	Max    float64
}

// lines turns a window's samples into a panel's lines; zeros counts the
// split lines left out for being 0 throughout (lines folded into "other"
// at sampling are not among them).
func lines(pts []point, pi int, pn Panel) (out []line, exported bool, zeros int) {
	for si, s := range pn.Series {
		prefix := lineKey(pi, si, "")
		labels := map[string]bool{}
		for _, p := range pts {
			for _, lv := range p.values {
				if k := lv.key; len(k) >= len(prefix) && k[:len(prefix)] == prefix {
					labels[k[len(prefix):]] = true
				}
			}
		}
		if len(labels) > 0 {
			exported = true
		}
		names := make([]string, 0, len(labels))
		for l := range labels {
			names = append(names, l)
		}
		sort.Strings(names)
		for _, l := range names {
			key := prefix + l
			ln := line{Name: s.Name, Bound: s.Bound}
			if ln.Name == "" {
				ln.Name = s.Metric
			}
			if s.By != "" {
				ln.Name = l
				if l == "" {
					ln.Name = "(none)"
				}
				if s.Name != "" {
					ln.Name = s.Name + " " + ln.Name
				}
			}
			var prev *point
			for i := range pts {
				v, ok := pts[i].get(key)
				if !ok {
					prev = nil
					continue
				}
				if !s.Rate {
					ln.Points = append(ln.Points, [2]float64{float64(pts[i].at.Unix()), v})
					continue
				}
				if prev != nil {
					pv, _ := prev.get(key)
					dt := pts[i].at.Sub(prev.at).Seconds()
					r := 0.0
					// A counter that went down was reset (a restart):
					// no rate across it.
					if dt > 0 && v >= pv {
						r = (v - pv) / dt
					}
					ln.Points = append(ln.Points, [2]float64{float64(pts[i].at.Unix()), r})
				}
				prev = &pts[i]
			}
			if n := len(ln.Points); n > 0 {
				ln.Last = ln.Points[n-1][1]
			}
			for _, pt := range ln.Points {
				ln.Max = max(ln.Max, pt[1])
			}
			if s.By != "" && !slices.ContainsFunc(ln.Points, func(pt [2]float64) bool { return pt[1] != 0 }) {
				zeros++
				continue
			}
			out = append(out, ln)
		}
	}
	return out, exported, zeros
}
