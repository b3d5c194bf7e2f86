package dashboard

import (
	"context"
	"crypto/subtle"
	"fmt"
	"html/template"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"fleetmesh.org/fleetmesh/internal/periodic"
)

// Options configure a Dashboard: the operator's settings, and what the
// node that serves it fills in.
type Options struct {
	Config
	// DaySample is how often the day window keeps a sample (default 5
	// min, 288 of them).
	DaySample time.Duration
	// Panels are what the page plots (default DefaultPanels()).
	Panels []Panel
	// Title heads the page (the node's DID, say).
	Title string
	// Headline, if set, is called at each page load for the facts at the
	// top of the page.
	Headline func() Headline
}

// Dashboard samples a node's metrics and serves them as plots.
type Dashboard struct {
	g    prometheus.Gatherer
	opts Options

	mu       sync.Mutex
	hour     ring
	day      ring
	lastDay  time.Time
	lastErr  string
	nsamples int
}

// New returns a dashboard over g. Run samples; ServeHTTP serves.
func New(g prometheus.Gatherer, opts Options) *Dashboard {
	if opts.SampleInterval.Duration <= 0 {
		opts.SampleInterval = DefaultConfig().SampleInterval
	}
	if opts.DaySample <= 0 {
		opts.DaySample = 5 * time.Minute
	}
	if opts.Panels == nil {
		opts.Panels = DefaultPanels()
	}
	return &Dashboard{
		g:    g,
		opts: opts,
		hour: ring{max: int(math.Ceil(float64(time.Hour) / float64(opts.SampleInterval.Duration)))},
		day:  ring{max: int(math.Ceil(float64(24*time.Hour) / float64(opts.DaySample)))},
	}
}

// Run samples until ctx ends.
func (d *Dashboard) Run(ctx context.Context) {
	periodic.Run(ctx, 0, d.opts.SampleInterval.Duration, nil, func() { d.Sample(time.Now()) })
}

// Sample takes one sample now (Run calls it; tests call it directly).
func (d *Dashboard) Sample(now time.Time) {
	mfs, err := d.g.Gather()
	fams := make(map[string]*dto.MetricFamily, len(mfs))
	for _, f := range mfs {
		fams[f.GetName()] = f
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var prev *point
	if n := len(d.hour.points); n > 0 {
		prev = &d.hour.points[n-1]
	}
	p := sample(d.opts.Panels, fams, now, prev)
	d.lastErr = ""
	if err != nil {
		d.lastErr = err.Error()
	}
	d.hour.push(p)
	if d.lastDay.IsZero() || now.Sub(d.lastDay) >= d.opts.DaySample {
		d.day.push(p)
		d.lastDay = now
	}
	d.nsamples++
}

// allowed says whether r may see the page: from loopback and not through a
// proxy, or with the token.
func (d *Dashboard) allowed(w http.ResponseWriter, r *http.Request) bool {
	if d.opts.Token != "" {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if q := r.URL.Query().Get("token"); q != "" {
			tok = q
		}
		if c, err := r.Cookie("fleetmesh_dashboard"); err == nil && tok == "" {
			tok = c.Value
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(d.opts.Token)) == 1 {
			if r.URL.Query().Get("token") != "" {
				http.SetCookie(w, &http.Cookie{Name: "fleetmesh_dashboard", Value: d.opts.Token, Path: "/dashboard",
					HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			}
			return true
		}
	}
	// A request a reverse proxy forwarded arrives from loopback but comes
	// from anywhere: it needs the token too.
	if r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" || r.Header.Get("X-Real-Ip") != "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServeHTTP serves the page (?window=hour or day).
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !d.allowed(w, r) {
		http.Error(w, "forbidden: the operator dashboard is served to loopback only; "+
			"set [dashboard] token in config.toml and pass it (?token=… or Authorization: Bearer …) to reach it from elsewhere",
			http.StatusForbidden)
		return
	}
	window := r.URL.Query().Get("window")
	if window != "day" {
		window = "hour"
	}
	d.mu.Lock()
	var pts []point
	if window == "day" {
		pts = append(pts, d.day.points...)
	} else {
		pts = append(pts, d.hour.points...)
	}
	lastErr, n := d.lastErr, d.nsamples
	d.mu.Unlock()

	span := time.Hour
	if window == "day" {
		span = 24 * time.Hour
	}
	now := time.Now()
	// The plots start at the window's start, or at the first sample when
	// the node is younger than the window, so that a new node's first
	// minutes are not a sliver at the right edge.
	from := now.Add(-span)
	if len(pts) > 0 && pts[0].at.After(from) {
		from = pts[0].at
	}
	page := pageData{Title: d.opts.Title, Window: window, Refresh: int(d.opts.SampleInterval.Duration / time.Second), Samples: n, Error: lastErr}
	if d.opts.Headline != nil {
		page.Headline = d.opts.Headline().facts()
	}
	if page.Refresh < 1 {
		page.Refresh = 1
	}
	for pi, pn := range d.opts.Panels {
		ls, exported, zeros := lines(pts, pi, pn)
		pv := renderPanel(pn, ls, exported, from, now)
		pv.Zeros = zeros
		page.Panels = append(page.Panels, pv)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	if err := pageTmpl.Execute(w, page); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

type pageData struct {
	Title    string
	Window   string
	Refresh  int
	Samples  int
	Error    string
	Headline []fact
	Panels   []panelView
}

type panelView struct {
	Title    string
	Unit     string
	Exported bool
	Empty    string
	Metrics  string
	Lines    []lineView
	// Zeros counts the split lines not drawn for being 0 throughout; the
	// legend says there were some.
	Zeros  int
	YMax   string
	From   string // the x axis' left end, as a clock time
	Width  int
	Height int
	PlotW  int
}

type lineView struct {
	Name   string
	Color  string
	Points string // SVG polyline points
	Count  int
	Last   string
	Max    string // the line's largest value, in full, for scripts that read the page
	// LastExact is Last in full, for scripts that read the page.
	LastExact string
	// Off says why a bound is not drawn (far above the other lines).
	Off string
}

// boundScale is how far above the other lines a Bound series may be and
// still be drawn (and set the scale).
const boundScale = 4

// palette: distinguishable on white, in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"}

// The plot area, and the margins right of it (y labels) and below it
// (x labels).
const plotW, plotH, axisW, axisH = 520, 140, 44, 16

func renderPanel(pn Panel, ls []line, exported bool, from, to time.Time) panelView {
	pv := panelView{Title: pn.Title, Unit: pn.Unit, Empty: pn.Empty, Exported: exported, Width: plotW + axisW, Height: plotH + axisH, PlotW: plotW,
		From: from.Format("15:04:05")}
	var names []string
	for _, s := range pn.Series {
		names = append(names, s.Metric)
	}
	pv.Metrics = strings.Join(names, ", ")
	// The scale is the other lines'; a bound joins it only when it is
	// near them (within boundScale), or it would flatten them.
	ymax, used := 0.0, 0.0
	for _, l := range ls {
		if l.Bound {
			continue
		}
		used = math.Max(used, l.Last)
		for _, p := range l.Points {
			ymax = math.Max(ymax, p[1])
		}
	}
	off := make([]bool, len(ls))
	for i, l := range ls {
		if !l.Bound {
			continue
		}
		if ymax > 0 && l.Max > boundScale*ymax || ymax == 0 && l.Max > 0 {
			off[i] = true
			continue
		}
		ymax = math.Max(ymax, l.Max)
	}
	if ymax == 0 {
		ymax = 1
	}
	pv.YMax = human(ymax)
	t0, t1 := float64(from.Unix()), float64(to.Unix())
	if t1 <= t0 {
		t0 = t1 - 1
	}
	for i, l := range ls {
		var b strings.Builder
		for _, p := range l.Points {
			x := (p[0] - t0) / (t1 - t0) * plotW
			if x < 0 {
				continue
			}
			y := plotH - p[1]/ymax*plotH
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		lv := lineView{Name: l.Name, Color: palette[i%len(palette)], Points: strings.TrimSpace(b.String()), Count: len(l.Points), Last: human(l.Last), LastExact: strconv.FormatFloat(l.Last, 'f', -1, 64), Max: strconv.FormatFloat(l.Max, 'f', -1, 64)}
		if off[i] {
			lv.Points, lv.Off = "", fmt.Sprintf("%.2g %% used; too far above to draw", 100*used/l.Last)
		}
		pv.Lines = append(pv.Lines, lv)
	}
	return pv
}

// human prints a value with a k/M/G suffix.
func human(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 10 || a == 0:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleetmesh node</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.2em;margin:0 0 .3em} .sub{color:#666;margin-bottom:1em}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:1em}
.panel{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.7em 1em}
.panel h2{font-size:1em;margin:0 0 .4em} .legend span{margin-right:1em;white-space:nowrap}
.none{color:#999;font-style:italic}
a{color:#1f77b4} .err{color:#b00}
.headline{background:#fff;border:1px solid #ddd;border-radius:6px;border-collapse:separate;padding:.4em .8em;margin-bottom:1em}
.headline th{text-align:left;padding:.15em 1em .15em 0;font-weight:600} .headline td{padding:.15em 1em .15em 0}
.headline .state{color:#555} .headline tr.ok .state::before{content:"● ";color:#2ca02c}
.headline tr.info .state::before{content:"● ";color:#999} .headline tr.warn .state::before{content:"● ";color:#ff7f0e}
.headline tr.bad .state::before{content:"● ";color:#d62728} .headline tr.bad .state{color:#b00}
</style></head><body>
<h1>fleetmesh node {{.Title}}</h1>
<div class="sub">last {{.Window}} ·
{{if eq .Window "hour"}}<b>hour</b> · <a href="?window=day">day</a>{{else}}<a href="?window=hour">hour</a> · <b>day</b>{{end}}
· {{.Samples}} samples · refreshes every {{.Refresh}} s
{{if .Error}}<div class="err">metrics: {{.Error}}</div>{{end}}</div>
{{if .Headline}}<table class="headline">
{{range .Headline}}<tr data-fact="{{.Name}}" class="{{.Tone}}"><th>{{.Name}}</th><td class="value">{{.Value}}</td><td class="state">{{.State}}</td></tr>
{{end}}</table>{{end}}
<div class="grid">
{{range .Panels}}<div class="panel" data-panel="{{.Title}}">
<h2>{{.Title}} <small>({{.Unit}}{{if .Exported}}, max {{.YMax}}{{end}})</small></h2>
{{if .Exported}}<svg width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}}">
<rect x="0" y="0" width="{{.PlotW}}" height="140" fill="#fcfcfc" stroke="#eee"/>
<line x1="0" y1="70" x2="{{.PlotW}}" y2="70" stroke="#f0f0f0"/>
{{range .Lines}}{{if not .Off}}<polyline fill="none" stroke="{{.Color}}" stroke-width="1.5" points="{{.Points}}" data-last="{{.LastExact}}" data-points="{{.Count}}" data-max="{{.Max}}"><title>{{.Name}}</title></polyline>{{end}}
{{end}}<text x="{{.PlotW}}" dx="4" y="10" font-size="11" fill="#666">{{.YMax}}</text>
<text x="{{.PlotW}}" dx="4" y="140" font-size="11" fill="#666">0</text>
<text x="0" y="154" font-size="11" fill="#666">{{.From}}</text>
<text x="{{.PlotW}}" y="154" font-size="11" fill="#666" text-anchor="end">now</text>
</svg>
<div class="legend">{{range .Lines}}<span><b style="color:{{.Color}}">━</b> {{.Name}}: {{.Last}}{{if .Off}} ({{.Off}}){{end}}</span>{{end}}{{if .Zeros}}<span class="none">lines at 0 throughout are not drawn</span>{{end}}</div>
{{else}}<p class="none" title="{{.Metrics}}">{{if .Empty}}{{.Empty}}{{else}}Nothing to plot yet: a line appears here once this node first counts it.{{end}}</p>{{end}}
</div>
{{end}}</div>
</body></html>
`))
