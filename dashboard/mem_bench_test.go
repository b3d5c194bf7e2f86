package dashboard

import (
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// BenchmarkWindowBytes reports the heap a full hour window and a day's
// worth of day samples of the default panels hold (bytes/window), over a
// registry with the Go collector and the node's labelled families.
func BenchmarkWindowBytes(b *testing.B) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, p := range DefaultPanels() {
		for _, s := range p.Series {
			if s.By == "" {
				g := prometheus.NewGauge(prometheus.GaugeOpts{Name: s.Metric, Help: "x"})
				if reg.Register(g) == nil {
					g.Set(1)
				}
				continue
			}
			by := s.by()
			v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: s.Metric, Help: "x"}, by)
			if reg.Register(v) != nil {
				continue
			}
			for i := range 4 {
				vals := make([]string, len(by))
				for j := range vals {
					vals[j] = string(rune('a' + i + j))
				}
				v.WithLabelValues(vals...).Set(float64(i))
			}
		}
	}
	var held float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		d := New(reg, Options{DaySample: 10 * time.Second})
		t0 := time.Now().Add(-24 * time.Hour)
		for i := range d.hour.max {
			d.Sample(t0.Add(time.Duration(i) * 10 * time.Second))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(d)
	}
	b.ReportMetric(held, "bytes/window")
}
